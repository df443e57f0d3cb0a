/* test-pytorch-match.c — our schedule generators against PyTorch's.
 *
 * tests/data/pytorch-schedules.txt holds, for a grid of (P ranks, M
 * micro-batches, V stages per rank), the compute actions each rank of
 * PyTorch's torch.distributed.pipelining runs, in order, or that PyTorch
 * rejects the combination (tools/gen-pytorch-golden.py writes it from
 * PyTorch's own schedules.py).  For every record we generate the same
 * schedule by its PyTorch name and require:
 *
 *   - PyTorch rejects it: we reject it too (status != PP_OK), except GPipe
 *     and 1F1B with M < P, which we accept;
 *   - otherwise: we accept it, have P ranks, and each rank's compute actions
 *     (F, B, I, W, OVERLAP_F_B), written in PyTorch's repr, are exactly
 *     PyTorch's list.
 *
 * The data file is $PP_TEST_DATA_DIR/pytorch-schedules.txt, or argv[1] (a
 * file, or a folder holding it).
 */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "pp-action.h"
#include "pp-schedule.h"

#define DATA_FILE "pytorch-schedules.txt"
#define MAX_DETAILED 3   /* mismatches printed in full per schedule */
#define CONTEXT 5        /* actions shown either side of the first difference */

static const char *const pytorch_names[] = {
  "GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS",
  "InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV",
};

typedef struct {
  char    *name;
  int      P, M, V;
  int      line;        /* of its "schedule" line */
  char    *reject;      /* PyTorch's reason, or NULL */
  char  ***ranks;       /* [P] NULL-terminated action lists */
} Record;

static GPtrArray *records;    /* of Record* */
static char      *data_path;
static char      *load_error; /* why the file could not be read, or NULL */

static void
record_free (gpointer data)
{
  Record *r = data;
  g_free (r->name);
  g_free (r->reject);
  if (r->ranks)
    for (int i = 0; i < r->P; i++)
      g_strfreev (r->ranks[i]);
  g_free (r->ranks);
  g_free (r);
}

/* Splits on blanks, dropping empty fields. */
static char **
split_words (const char *s)
{
  GStrvBuilder *b = g_strv_builder_new ();
  char **parts = g_strsplit_set (s, " \t", -1);
  for (char **p = parts; *p; p++)
    if (**p)
      g_strv_builder_add (b, *p);
  g_strfreev (parts);
  char **out = g_strv_builder_end (b);
  g_strv_builder_unref (b);
  return out;
}

static gboolean
parse_int (const char *s, int *out)
{
  char *end;
  long v = strtol (s, &end, 10);
  if (end == s || *end || v < 0 || v > 1000000)
    return FALSE;
  *out = (int) v;
  return TRUE;
}

#define PARSE_FAIL(...)                                                   \
  do {                                                                    \
    load_error = g_strdup_printf ("%s:%d: ", path, lineno + 1);           \
    char *m_ = g_strdup_printf (__VA_ARGS__);                             \
    char *t_ = g_strconcat (load_error, m_, NULL);                        \
    g_free (load_error); g_free (m_);                                     \
    load_error = t_;                                                      \
    goto out;                                                             \
  } while (0)

static void
load_records (const char *path)
{
  char *text = NULL;
  GError *error = NULL;
  char **lines = NULL;
  Record *cur = NULL;
  int next_rank = 0;

  records = g_ptr_array_new_with_free_func (record_free);
  if (!g_file_get_contents (path, &text, NULL, &error))
    {
      load_error = g_strdup_printf ("cannot read %s: %s", path, error->message);
      g_error_free (error);
      return;
    }

  lines = g_strsplit (text, "\n", -1);
  int lineno = 0;
  for (; lines[lineno]; lineno++)
    {
      char *line = g_strstrip (lines[lineno]);
      if (!*line || line[0] == '#')
        continue;

      if (g_str_has_prefix (line, "schedule "))
        {
          if (cur)
            PARSE_FAIL ("'schedule' inside a record (no 'end')");
          char **w = split_words (line);
          gboolean ok = g_strv_length (w) == 8 && strcmp (w[2], "P") == 0
                        && strcmp (w[4], "M") == 0 && strcmp (w[6], "V") == 0;
          cur = g_new0 (Record, 1);
          cur->line = lineno + 1;
          if (ok)
            {
              cur->name = g_strdup (w[1]);
              ok = parse_int (w[3], &cur->P) && parse_int (w[5], &cur->M)
                   && parse_int (w[7], &cur->V) && cur->P > 0;
            }
          g_strfreev (w);
          if (!ok)
            {
              record_free (cur);
              cur = NULL;
              PARSE_FAIL ("malformed schedule line '%s'", line);
            }
          next_rank = 0;
        }
      else if (!cur)
        PARSE_FAIL ("'%s' outside a record", line);
      else if (g_str_has_prefix (line, "reject"))
        {
          if (cur->reject || next_rank)
            PARSE_FAIL ("unexpected 'reject'");
          cur->reject = g_strdup (g_strstrip (line + strlen ("reject")));
        }
      else if (g_str_has_prefix (line, "rank "))
        {
          char *colon = strchr (line, ':');
          int r;
          if (!colon)
            PARSE_FAIL ("rank line without ':'");
          *colon = '\0';
          if (!parse_int (g_strstrip (line + strlen ("rank ")), &r) || r != next_rank
              || r >= cur->P || cur->reject)
            PARSE_FAIL ("unexpected rank line for rank '%s'", line + strlen ("rank "));
          if (!cur->ranks)
            cur->ranks = g_new0 (char **, cur->P);
          cur->ranks[r] = split_words (colon + 1);
          next_rank++;
        }
      else if (strcmp (line, "end") == 0)
        {
          if (!cur->reject && next_rank != cur->P)
            PARSE_FAIL ("record has %d rank lines, P is %d", next_rank, cur->P);
          g_ptr_array_add (records, cur);
          cur = NULL;
        }
      else
        PARSE_FAIL ("unknown line '%s'", line);
    }
  if (cur)
    PARSE_FAIL ("last record has no 'end'");

out:
  if (cur)
    record_free (cur);
  g_strfreev (lines);
  g_free (text);
}

/* ---- comparing one record -------------------------------------------- */

/* Our compute actions of one rank, in PyTorch's repr. */
static GPtrArray *
our_compute (const PpSchedule *s, int rank)
{
  GPtrArray *out = g_ptr_array_new_with_free_func (g_free);
  const PpRankActions *ra = &s->rank[rank];
  for (int i = 0; i < ra->n_actions; i++)
    {
      const PpAction *a = &ra->actions[i];
      if (!pp_action_is_compute (a))
        continue;
      char buf[PP_ACTION_STR_MAX];
      g_ptr_array_add (out, g_strdup (pp_action_to_string (a, buf, sizeof buf)));
    }
  return out;
}

/* "… a b [c] d …" around index `at` (brackets mark it). */
static char *
window (char **v, guint n, guint at)
{
  GString *s = g_string_new (NULL);
  guint lo = at > CONTEXT ? at - CONTEXT : 0;
  guint hi = MIN (n, at + CONTEXT + 1);
  if (lo > 0)
    g_string_append (s, "... ");
  for (guint i = lo; i < hi; i++)
    g_string_append_printf (s, i == at ? "[%s] " : "%s ", v[i]);
  if (at >= n)
    g_string_append (s, "[<end>] ");
  if (hi < n)
    g_string_append (s, "...");
  return g_string_free (s, FALSE);
}

static char *
joined (char **v, guint n)
{
  GString *s = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (s, "%s%s", i ? " " : "", v[i]);
  return g_string_free (s, FALSE);
}

typedef struct {
  int records, matched, both_reject, failures;
} Tally;

/* Checks one record; returns TRUE when it agrees.  `detail` asks for the
 * full account of a disagreement on stderr. */
static gboolean
check_record (const Record *rec, gboolean detail, Tally *t)
{
  PpSchedule *s = NULL;
  PpError err = { 0 };
  PpStatus st = pp_schedule_generate (rec->name, rec->P, rec->M, rec->V, &s, &err);
  gboolean single_small = (strcmp (rec->name, "GPipe") == 0 || strcmp (rec->name, "1F1B") == 0)
                          && rec->M < rec->P;
  gboolean ok = TRUE;
  const char *what = rec->name;

  if (rec->reject && !single_small)
    {
      if (st == PP_OK)
        {
          ok = FALSE;
          if (detail)
            g_printerr ("MISMATCH %s P=%d M=%d V=%d (line %d): PyTorch rejects it (%s) "
                        "but we accept it\n",
                        what, rec->P, rec->M, rec->V, rec->line, rec->reject);
        }
      else
        t->both_reject++;
      goto done;
    }

  if (st != PP_OK)
    {
      ok = FALSE;
      if (detail)
        g_printerr ("MISMATCH %s P=%d M=%d V=%d (line %d): PyTorch %s, but we reject it: "
                    "%s: %s\n",
                    what, rec->P, rec->M, rec->V, rec->line,
                    rec->reject ? "rejects it at construction (we must accept M < P)"
                                : "accepts it",
                    pp_status_name (st), err.msg);
      goto done;
    }
  if (rec->reject)  /* GPipe/1F1B with M < P: accepting is all we can check */
    goto done;

  if (s->ranks != rec->P)
    {
      ok = FALSE;
      if (detail)
        g_printerr ("MISMATCH %s P=%d M=%d V=%d (line %d): we have %d ranks\n",
                    what, rec->P, rec->M, rec->V, rec->line, s->ranks);
      goto done;
    }

  for (int r = 0; r < rec->P; r++)
    {
      GPtrArray *ours = our_compute (s, r);
      char **theirs = rec->ranks[r];
      guint n_theirs = g_strv_length (theirs), n_ours = ours->len;
      guint i = 0;
      while (i < n_theirs && i < n_ours && strcmp (theirs[i], ours->pdata[i]) == 0)
        i++;
      if (i < n_theirs || i < n_ours)
        {
          if (ok && detail)
            {
              char **ov = (char **) ours->pdata;
              char *wt = window (theirs, n_theirs, i), *wo = window (ov, n_ours, i);
              char *ft = joined (theirs, n_theirs), *fo = joined (ov, n_ours);
              g_printerr ("MISMATCH %s P=%d M=%d V=%d (line %d) rank %d: first difference at "
                          "index %u (PyTorch has %u compute actions, we have %u)\n"
                          "  pytorch: %s\n  ours:    %s\n"
                          "  pytorch full: %s\n  ours full:    %s\n",
                          what, rec->P, rec->M, rec->V, rec->line, r, i, n_theirs, n_ours,
                          wt, wo, ft, fo);
              g_free (wt); g_free (wo); g_free (ft); g_free (fo);
            }
          else if (detail)
            g_printerr ("  ... rank %d differs too (first at index %u)\n", r, i);
          ok = FALSE;
        }
      g_ptr_array_unref (ours);
    }
  if (ok)
    t->matched++;

done:
  if (!ok)
    t->failures++;
  t->records++;
  pp_schedule_free (s);
  return ok;
}

/* What if tells a PyTorch user which class runs a schedule: for each of
 * PyTorch's own, "Schedule" + its name here (the golden file's names, which
 * pipescope's names alias); ZB-H1 and ZB-H2 through a CSV (""); DualPipe,
 * two model copies, and unknown names not at all (NULL). */
static void
test_pytorch_class (void)
{
  for (guint k = 0; k < G_N_ELEMENTS (pytorch_names); k++)
    {
      g_autofree char *want = g_strdup_printf ("Schedule%s", pytorch_names[k]);
      g_assert_cmpstr (pp_schedule_pytorch_class (pytorch_names[k]), ==, want);
    }
  g_assert_cmpstr (pp_schedule_pytorch_class ("ZB-H1"), ==, "");
  g_assert_cmpstr (pp_schedule_pytorch_class ("zbh2"), ==, "");
  g_assert_null (pp_schedule_pytorch_class ("DualPipe"));
  g_assert_null (pp_schedule_pytorch_class ("no-such-schedule"));
  g_assert_null (pp_schedule_pytorch_class (NULL));
}

static void
test_schedule (gconstpointer data)
{
  const char *name = data;
  Tally t = { 0 };

  if (load_error)
    {
      g_test_fail_printf ("%s", load_error);
      return;
    }
  for (guint i = 0; i < records->len; i++)
    {
      const Record *rec = records->pdata[i];
      if (strcmp (rec->name, name) == 0)
        check_record (rec, t.failures < MAX_DETAILED, &t);
    }
  g_printerr ("%s: %d records: %d match, %d rejected by both, %d mismatches\n",
              name, t.records, t.matched, t.both_reject, t.failures);
  if (t.records == 0)
    g_test_fail_printf ("no %s records in %s", name, data_path);
  else if (t.failures)
    g_test_fail_printf ("%s: %d of %d records differ from PyTorch", name, t.failures,
                        t.records);
}

static void
test_file_complete (void)
{
  GString *problems = g_string_new (NULL);

  if (load_error)
    {
      g_test_fail_printf ("%s", load_error);
      g_string_free (problems, TRUE);
      return;
    }
  for (guint k = 0; k < G_N_ELEMENTS (pytorch_names); k++)
    {
      int n = 0, accepted = 0;
      for (guint i = 0; i < records->len; i++)
        {
          const Record *rec = records->pdata[i];
          if (strcmp (rec->name, pytorch_names[k]) == 0)
            {
              n++;
              accepted += rec->reject == NULL;
            }
        }
      if (n == 0 || accepted == 0)
        g_string_append_printf (problems, "%s%s has %d records (%d accepted by PyTorch)",
                                problems->len ? "; " : "", pytorch_names[k], n, accepted);
    }
  /* every record names a PyTorch schedule we know */
  for (guint i = 0; i < records->len; i++)
    {
      const Record *rec = records->pdata[i];
      gboolean known = FALSE;
      for (guint k = 0; k < G_N_ELEMENTS (pytorch_names); k++)
        known |= strcmp (rec->name, pytorch_names[k]) == 0;
      if (!known)
        g_string_append_printf (problems, "%sline %d: unknown schedule '%s'",
                                problems->len ? "; " : "", rec->line, rec->name);
    }
  if (problems->len)
    g_test_fail_printf ("%s: %s", data_path, problems->str);
  g_string_free (problems, TRUE);
}

int
main (int argc, char **argv)
{
  /* Run every case even when one fails, so each schedule gets its verdict. */
  char **args = g_new0 (char *, argc + 2);
  int n_args = 0;
  for (int i = 0; i < argc; i++)
    args[n_args++] = argv[i];
  args[n_args++] = (char *) "--keep-going";
  char **args_owned = args;
  g_test_init (&n_args, &args, NULL);
  argc = n_args;
  argv = args;

  const char *dir = g_getenv ("PP_TEST_DATA_DIR");
  if (dir && *dir)
    data_path = g_build_filename (dir, DATA_FILE, NULL);
  else if (argc > 1)
    data_path = g_file_test (argv[1], G_FILE_TEST_IS_DIR)
                  ? g_build_filename (argv[1], DATA_FILE, NULL)
                  : g_strdup (argv[1]);
  else
    data_path = g_build_filename ("tests", "data", DATA_FILE, NULL);
  load_records (data_path);

  g_test_add_func ("/pytorch-match/file-complete", test_file_complete);
  g_test_add_func ("/pytorch-match/class", test_pytorch_class);
  for (guint k = 0; k < G_N_ELEMENTS (pytorch_names); k++)
    {
      char *path = g_strdup_printf ("/pytorch-match/%s", pytorch_names[k]);
      g_test_add_data_func (path, pytorch_names[k], test_schedule);
      g_free (path);
    }

  int rc = g_test_run ();
  g_ptr_array_unref (records);
  g_free (load_error);
  g_free (data_path);
  g_free (args_owned);
  return rc;
}
