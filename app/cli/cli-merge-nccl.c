/* cli-merge-nccl.c — a merge splits the waits of NCCL receives within a
 * node (cli-merge-nccl.h): the processes' "nccl:*" spans kept as their
 * files are copied, met by runtime/pp-nccl-match.c once every file is in. */
#include "cli-merge-nccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp-nccl-match.h"
#include "pp-nccl-split.h"

static int
grow (void **p, size_t *cap, size_t n, size_t size)
{
  if (n < *cap)
    return 0;
  size_t c = *cap ? 2 * *cap : 64;
  void *q = realloc (*p, c * size);
  if (q == NULL)
    return -1;
  *p = q;
  *cap = c;
  return 0;
}

static const char *
name_of (void *user, uint32_t id)
{
  const PpCliNccl *n = user;
  for (size_t i = 0; i < n->n_names; i++)
    if (n->names[i].id == id)
      return n->names[i].text;
  return NULL;
}

int
pp_cli_nccl_name (PpCliNccl *n, uint32_t id, const char *name)
{
  if (strncmp (name, "nccl:", 5) != 0)
    return 0;
  for (size_t i = 0; i < n->n_names; i++)
    if (n->names[i].id == id)
      {
        /* the last one for an id wins, as in a trace */
        char *t = strdup (name);
        if (t == NULL)
          return -1;
        free (n->names[i].text);
        n->names[i].text = t;
        return 0;
      }
  if (grow ((void **) &n->names, &n->cap_names, n->n_names, sizeof *n->names) != 0)
    return -1;
  char *t = strdup (name);
  if (t == NULL)
    return -1;
  n->names[n->n_names++] = (PpCliNcclName) { id, t };
  return 0;
}

int
pp_cli_nccl_span (PpCliNccl *n, const PpSpan *s, int32_t process)
{
  if ((s->kind != PP_SPAN_KERNEL && s->kind != PP_SPAN_WAIT) || s->name_id == 0
      || name_of (n, s->name_id) == NULL)
    return 0;
  if (grow ((void **) &n->spans, &n->cap_spans, n->n_spans, sizeof *n->spans) != 0
      || grow ((void **) &n->process, &n->cap_process, n->n_spans, sizeof *n->process) != 0)
    return -1;
  n->spans[n->n_spans] = *s;
  n->process[n->n_spans++] = process;
  return 0;
}

PpStatus
pp_cli_nccl_write_split (PpCliNccl *n, PpTraceWriter *w, uint32_t *next_name, size_t *n_written,
                         PpError *err)
{
  PpNcclMatchedWait *waits = NULL;
  size_t n_waits = 0;
  PpStatus st;

  *n_written = 0;
  if (n->n_spans == 0)
    return PP_OK;
  if ((st = pp_nccl_match (n->spans, n->n_spans, name_of, n, &waits, &n_waits, err)) != PP_OK)
    return st;
  uint32_t part_id[2] = { 0, 0 };
  for (size_t i = 0; i < n_waits && st == PP_OK; i++)
    {
      int part = waits[i].part == PP_NCCL_PART_TRANSFER;
      if (part_id[part] == 0)
        {
          /* a name of its own: the inputs' ids are all below *next_name */
          char nm[32];
          snprintf (nm, sizeof nm, "nccl:%s", pp_nccl_part_name (waits[i].part));
          if (*next_name == UINT32_MAX)
            {
              st = pp_error_set (err, PP_EINVAL, "too many span names for NCCL's waits");
              break;
            }
          part_id[part] = (*next_name)++;
          if ((st = pp_trace_write_string (w, part_id[part], nm, err)) != PP_OK)
            break;
        }
      PpTraceItem it;
      memset (&it, 0, sizeof it);
      it.type = PP_TRACE_ITEM_SPAN;
      it.process = n->process[waits[i].recv];
      it.span = waits[i].wait;
      it.span.name_id = part_id[part];
      if ((st = pp_trace_write_item (w, &it, err)) == PP_OK)
        (*n_written)++;
    }
  free (waits);
  return st;
}

void
pp_cli_nccl_clear (PpCliNccl *n)
{
  for (size_t i = 0; i < n->n_names; i++)
    free (n->names[i].text);
  free (n->names);
  free (n->spans);
  free (n->process);
  memset (n, 0, sizeof *n);
}
