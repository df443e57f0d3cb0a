#include "pp-event.h"

const char *
pp_span_kind_name (PpSpanKind kind)
{
  static const char *const names[PP_N_SPAN_KINDS] = {
    "F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "OPT", "WAIT",
    "KERNEL", "MEMCPY", "MEMSET", "OVERLAP_F_B",
    "UNSHARD", "RESHARD", "REDUCE_GRAD", "WAIT_REDUCE_GRAD",
    "GC", "HOST_SCHEDULE", "HOST_LOSS", "HOST_DATA", "HOST_ZERO_GRAD",
    "LAUNCH", "LOSS",
  };
  return (unsigned) kind < PP_N_SPAN_KINDS ? names[kind] : "?";
}

const char *
pp_counter_kind_name (PpCounterKind kind)
{
  static const char *const names[PP_N_COUNTER_KINDS] = {
    "loss", "activation_bytes", "device_bytes", "inflight",
    "collective_calls", "collective_bytes",
    "run_delay_ns", "probe_self_ns", "on_cpu_ns",
    "loss_part",
  };
  return (unsigned) kind < PP_N_COUNTER_KINDS ? names[kind] : "?";
}

int
pp_span_kind_is_block (int kind)
{
  return kind == PP_SPAN_F || kind == PP_SPAN_B || kind == PP_SPAN_I || kind == PP_SPAN_W
         || kind == PP_SPAN_OVERLAP_F_B;
}

int
pp_span_kind_is_dp_comm (int kind)
{
  return kind == PP_SPAN_UNSHARD || kind == PP_SPAN_RESHARD || kind == PP_SPAN_REDUCE_GRAD
         || kind == PP_SPAN_WAIT_REDUCE_GRAD;
}

int
pp_span_kind_is_work (int kind)
{
  return pp_span_kind_is_block (kind) || kind == PP_SPAN_OPT || pp_span_kind_is_dp_comm (kind)
         || kind == PP_SPAN_LOSS;
}

int
pp_span_kind_is_host (int kind)
{
  return kind >= PP_SPAN_GC && kind <= PP_SPAN_HOST_ZERO_GRAD;
}
