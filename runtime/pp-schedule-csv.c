/* pp-schedule-csv.c — PyTorch's "compute_only" schedule CSV
 * (PipelineScheduleMulti._dump_csv / _load_csv): one row per rank, one cell
 * per action in _Action repr, empty cells for idle steps. */
#include "pp-schedule-private.h"

#include <stdlib.h>
#include <string.h>

#define CSV_MAX_LINE   (64L << 20)
#define CSV_MAX_RANKS  4096
#define CSV_MAX_STAGES 8192
#define CSV_MAX_CELLS  (1L << 26)
#define CSV_MAX_MB     (1 << 20)

PpStatus
pp_schedule_write_csv (const PpSchedule *s, FILE *out, PpError *err)
{
  char buf[PP_ACTION_STR_MAX];

  /* The format knows one chain of stages that all see every micro-batch. */
  for (int st = 0; st < s->n_stages; st++)
    if (s->stage_prev[st] != st - 1 || s->stage_next[st] != (st + 1 < s->n_stages ? st + 1 : -1)
        || s->stage_mb_lo[st] != 0 || s->stage_mb_hi[st] != s->microbatches)
      return pp_error_set (err, PP_EUNSUPPORTED,
                           "%s runs stages that are not one chain over all micro-batches "
                           "(as DualPipe's two directions), which PyTorch's CSV cannot express",
                           s->name);
  for (int r = 0; r < s->ranks; r++)
    {
      for (int k = 0; k < s->rank[r].n_actions; k++)
        {
          if (k > 0)
            fputc (',', out);
          fputs (pp_action_to_string (&s->rank[r].actions[k], buf, sizeof buf), out);
        }
      fputs ("\r\n", out);   /* what Python's csv.writer writes */
    }
  if (fflush (out) != 0 || ferror (out))
    return pp_error_set (err, PP_EIO, "cannot write the schedule CSV");
  return PP_OK;
}

typedef struct {
  PpAction *a;
  int n, cap;
} Row;

static PpStatus
row_push (Row *row, PpAction a)
{
  if (row->n == row->cap)
    {
      int cap = row->cap ? row->cap * 2 : 64;
      PpAction *n = realloc (row->a, (size_t) cap * sizeof *n);
      if (n == NULL)
        return PP_ENOMEM;
      row->a = n;
      row->cap = cap;
    }
  row->a[row->n++] = a;
  return PP_OK;
}

static void
free_rows (Row *rows, int n)
{
  for (int i = 0; i < n; i++)
    free (rows[i].a);
  free (rows);
}

/* An action's stage or micro-batch is out of range: a negative one, or past
 * what a schedule may hold. */
static int
out_of_range (int stage, int mb)
{
  return stage < 0 || stage >= CSV_MAX_STAGES || mb < 0 || mb >= CSV_MAX_MB;
}

/* The inference shared by the CSV reader and pp_schedule_from_actions:
 * stages, the stage-to-rank map, P, M and V from per-rank action lists,
 * then validation.  Takes the rows' arrays into the schedule (rows[r].a is
 * NULL after a success).  what names the source in messages ("the CSV"),
 * row one of its rows ("row"). */
static PpStatus
infer_schedule (Row *rows, int n_rows, const char *name, const char *what, const char *row,
                long max_cells, PpSchedule **out, PpError *err)
{
  int max_stage = -1, max_mb = -1;
  int *stage_rank = NULL;
  PpSchedule *s = NULL;
  PpStatus st = PP_OK;
  char buf[PP_ACTION_STR_MAX];

  *out = NULL;
  if (n_rows > CSV_MAX_RANKS)
    return pp_error_set (err, PP_EFORMAT, "%s has %d %ss, more than %d ranks", what, n_rows, row, CSV_MAX_RANKS);
  for (int r = 0; r < n_rows; r++)
    for (int k = 0; k < rows[r].n; k++)
      {
        const PpAction *a = &rows[r].a[k];
        int overlap = a->kind == PP_ACT_OVERLAP_F_B;
        if (!pp_action_is_compute (a))
          return pp_error_set (err, PP_EFORMAT,
                               "%s, %s %d, step %d: kind %d is not a compute action (F, B, I, W, OVERLAP_F_B)",
                               what, row, r, k, a->kind);
        if (out_of_range (a->stage, a->microbatch)
            || (overlap && (out_of_range (a->sub_stage, a->sub_microbatch)
                            || (a->sub_kind != PP_ACT_B && a->sub_kind != PP_ACT_I))))
          return pp_error_set (err, PP_EFORMAT,
                               "%s, %s %d, step %d: %s is out of range (at most %d stages and %d micro-batches)",
                               what, row, r, k, pp_action_to_string (a, buf, sizeof buf),
                               CSV_MAX_STAGES, CSV_MAX_MB);
        int hi_stage = overlap && a->sub_stage > a->stage ? a->sub_stage : a->stage;
        int hi_mb = overlap && a->sub_microbatch > a->microbatch ? a->sub_microbatch : a->microbatch;
        if (hi_stage > max_stage) max_stage = hi_stage;
        if (hi_mb > max_mb) max_mb = hi_mb;
      }
  if (n_rows < 1 || max_stage < 0)
    return pp_error_set (err, PP_EFORMAT, "%s holds no actions: expected one %s of actions per rank", what, row);
  if ((long) (max_stage + 1) * (long) (max_mb + 1) > max_cells)
    return pp_error_set (err, PP_EFORMAT, "%s names %d stages x %d micro-batches, more than supported (%ld)",
                         what, max_stage + 1, max_mb + 1, max_cells);

  /* Stages to ranks, from where each stage appears. */
  int n_stages = max_stage + 1;
  stage_rank = malloc ((size_t) n_stages * sizeof (int));
  if (stage_rank == NULL)
    goto oom;
  for (int i = 0; i < n_stages; i++)
    stage_rank[i] = -1;
  for (int r = 0; r < n_rows; r++)
    for (int k = 0; k < rows[r].n; k++)
      {
        const PpAction *a = &rows[r].a[k];
        int stages[2] = { a->stage, a->kind == PP_ACT_OVERLAP_F_B ? a->sub_stage : a->stage };
        for (int j = 0; j < 2; j++)
          {
            int stg = stages[j];
            if (stage_rank[stg] == -1)
              stage_rank[stg] = r;
            else if (stage_rank[stg] != r)
              {
                st = pp_error_set (err, PP_EFORMAT,
                                   "rank %d, step %d: %s runs stage %d, which rank %d also runs; "
                                   "a stage lives on one rank",
                                   r, k, pp_action_to_string (a, buf, sizeof buf), stg, stage_rank[stg]);
                goto out;
              }
          }
      }
  for (int i = 0; i < n_stages; i++)
    if (stage_rank[i] < 0)
      {
        st = pp_error_set (err, PP_EFORMAT, "stage %d never appears, but stage %d does", i, max_stage);
        goto out;
      }
  if (n_rows < 2)
    {
      st = pp_error_set (err, PP_EFORMAT, "%s has one %s; a pipeline needs at least 2 ranks", what, row);
      goto out;
    }
  if (n_stages % n_rows != 0)
    {
      st = pp_error_set (err, PP_EFORMAT,
                         "%d stages over %d ranks: every rank must hold the same number of stages",
                         n_stages, n_rows);
      goto out;
    }

  s = pp_schedule_new (name ? name : "custom", n_rows, max_mb + 1, n_stages / n_rows, PP_PLACE_CUSTOM);
  if (s == NULL)
    goto oom;
  memcpy (s->stage_rank, stage_rank, (size_t) n_stages * sizeof (int));
  for (int r = 0; r < n_rows; r++)
    {
      free (s->rank[r].actions);
      s->rank[r].actions = rows[r].a;
      s->rank[r].n_actions = rows[r].n;
      s->rank[r].capacity = rows[r].cap;
      rows[r].a = NULL;
      rows[r].n = rows[r].cap = 0;
    }
  if ((st = pp_schedule_validate (s, err)) != PP_OK)
    {
      pp_schedule_free (s);
      s = NULL;
      goto out;
    }
  *out = s;
  goto out;

oom:
  st = pp_error_set (err, PP_ENOMEM, "out of memory while building the schedule from %s", what);
out:
  free (stage_rank);
  return st;
}

PpStatus
pp_schedule_from_actions (int ranks, const PpAction *const *actions, const int *n_actions,
                          const char *name, long max_cells, PpSchedule **out, PpError *err)
{
  Row *rows;
  PpStatus st;

  *out = NULL;
  if (ranks < 0 || ranks > CSV_MAX_RANKS)
    return pp_error_set (err, PP_EFORMAT, "the plan has %d ranks, more than %d", ranks, CSV_MAX_RANKS);
  if ((rows = calloc ((size_t) ranks + 1, sizeof *rows)) == NULL)
    return pp_error_set (err, PP_ENOMEM, "out of memory while building the schedule from the plan");
  for (int r = 0; r < ranks; r++)
    {
      int n = n_actions[r] > 0 ? n_actions[r] : 0;
      if (n > 0 && (rows[r].a = malloc ((size_t) n * sizeof *rows[r].a)) == NULL)
        {
          free_rows (rows, ranks);
          return pp_error_set (err, PP_ENOMEM, "out of memory while building the schedule from the plan");
        }
      if (n > 0)
        memcpy (rows[r].a, actions[r], (size_t) n * sizeof *rows[r].a);
      rows[r].n = rows[r].cap = n;
    }
  st = infer_schedule (rows, ranks, name, "the plan", "rank",
                       max_cells > 0 && max_cells < CSV_MAX_CELLS ? max_cells : CSV_MAX_CELLS, out, err);
  free_rows (rows, ranks);
  return st;
}

PpStatus
pp_schedule_read_csv (FILE *in, const char *name, PpSchedule **out, PpError *err)
{
  Row *rows = NULL;
  int n_rows = 0, cap_rows = 0;
  char *line = NULL;
  size_t line_cap = 0;
  ssize_t len;
  long lineno = 0;
  PpStatus st = PP_OK;

  *out = NULL;
  while ((len = getline (&line, &line_cap, in)) >= 0)
    {
      lineno++;
      if (len > CSV_MAX_LINE)
        {
          st = pp_error_set (err, PP_EFORMAT, "line %ld: longer than %ld bytes", lineno, CSV_MAX_LINE);
          goto out;
        }
      while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        line[--len] = '\0';
      if (n_rows == CSV_MAX_RANKS)
        {
          st = pp_error_set (err, PP_EFORMAT, "line %ld: more than %d ranks", lineno, CSV_MAX_RANKS);
          goto out;
        }
      if (n_rows == cap_rows)
        {
          int cap = cap_rows ? cap_rows * 2 : 16;
          Row *n = realloc (rows, (size_t) cap * sizeof *n);
          if (n == NULL)
            goto oom;
          memset (n + cap_rows, 0, (size_t) (cap - cap_rows) * sizeof *n);
          rows = n;
          cap_rows = cap;
        }
      Row *row = &rows[n_rows++];
      char *p = line;
      int col = 0;
      for (;;)
        {
          char *comma = strchr (p, ',');
          if (comma)
            *comma = '\0';
          /* Python's csv module quotes a cell only if it needs it; ours never do,
           * but accept a quoted one. */
          size_t cl = strlen (p);
          if (cl >= 2 && p[0] == '"' && p[cl - 1] == '"')
            {
              p[cl - 1] = '\0';
              p++;
            }
          PpAction a;
          PpError perr;
          PpStatus ps = pp_action_parse (p, &a, &perr);
          col++;
          if (ps == PP_OK)
            {
              if (!pp_action_is_compute (&a))
                {
                  st = pp_error_set (err, PP_EFORMAT,
                                     "line %ld, column %d: '%s' is not a compute action; "
                                     "a compute_only schedule holds F, B, I, W and OVERLAP_F_B only",
                                     lineno, col, p);
                  goto out;
                }
              int hi_stage = a.stage, hi_mb = a.microbatch;
              if (a.kind == PP_ACT_OVERLAP_F_B)
                {
                  if (a.sub_stage > hi_stage) hi_stage = a.sub_stage;
                  if (a.sub_microbatch > hi_mb) hi_mb = a.sub_microbatch;
                }
              if (hi_stage >= CSV_MAX_STAGES || hi_mb >= CSV_MAX_MB)
                {
                  st = pp_error_set (err, PP_EFORMAT,
                                     "line %ld, column %d: '%s' is out of range (at most %d stages and %d micro-batches)",
                                     lineno, col, p, CSV_MAX_STAGES, CSV_MAX_MB);
                  goto out;
                }
              if (row_push (row, a) != PP_OK)
                goto oom;
            }
          else if (ps != PP_EINVAL)  /* EINVAL: an empty cell, an idle step */
            {
              st = pp_error_set (err, PP_EFORMAT, "line %ld, column %d: %s", lineno, col, perr.msg);
              goto out;
            }
          if (!comma)
            break;
          p = comma + 1;
        }
    }
  if (ferror (in))
    {
      st = pp_error_set (err, PP_EIO, "cannot read the schedule CSV");
      goto out;
    }
  st = infer_schedule (rows, n_rows, name, "the CSV", "row", CSV_MAX_CELLS, out, err);
  goto out;

oom:
  st = pp_error_set (err, PP_ENOMEM, "out of memory while reading the schedule CSV");
out:
  free (line);
  free_rows (rows, n_rows);
  return st;
}
