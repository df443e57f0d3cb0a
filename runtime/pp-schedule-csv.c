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

PpStatus
pp_schedule_read_csv (FILE *in, const char *name, PpSchedule **out, PpError *err)
{
  Row *rows = NULL;
  int n_rows = 0, cap_rows = 0;
  char *line = NULL;
  size_t line_cap = 0;
  ssize_t len;
  int max_stage = -1, max_mb = -1;
  long lineno = 0;
  PpStatus st = PP_OK;
  PpSchedule *s = NULL;
  int *stage_rank = NULL;

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
              if (hi_stage >= CSV_MAX_STAGES || hi_mb >= (1 << 20))
                {
                  st = pp_error_set (err, PP_EFORMAT,
                                     "line %ld, column %d: '%s' is out of range (at most %d stages and %d micro-batches)",
                                     lineno, col, p, CSV_MAX_STAGES, 1 << 20);
                  goto out;
                }
              if (hi_stage > max_stage) max_stage = hi_stage;
              if (hi_mb > max_mb) max_mb = hi_mb;
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
  if (n_rows < 1 || max_stage < 0)
    {
      st = pp_error_set (err, PP_EFORMAT, "the CSV holds no actions: expected one row of actions per rank");
      goto out;
    }
  if ((long) (max_stage + 1) * (long) (max_mb + 1) > CSV_MAX_CELLS)
    {
      st = pp_error_set (err, PP_EFORMAT, "the CSV names %d stages x %d micro-batches, more than supported",
                         max_stage + 1, max_mb + 1);
      goto out;
    }

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
                char buf[PP_ACTION_STR_MAX];
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
      st = pp_error_set (err, PP_EFORMAT, "the CSV has one row; a pipeline needs at least 2 ranks");
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
  st = pp_error_set (err, PP_ENOMEM, "out of memory while reading the schedule CSV");
out:
  free (stage_rank);
  free (line);
  free_rows (rows, n_rows);
  return st;
}
