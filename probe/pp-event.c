#include "pp-event.h"

const char *
pp_span_kind_name (PpSpanKind kind)
{
  static const char *const names[PP_N_SPAN_KINDS] = {
    "F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "OPT", "WAIT",
    "KERNEL", "MEMCPY", "MEMSET", "OVERLAP_F_B",
  };
  return (unsigned) kind < PP_N_SPAN_KINDS ? names[kind] : "?";
}

const char *
pp_counter_kind_name (PpCounterKind kind)
{
  static const char *const names[PP_N_COUNTER_KINDS] = {
    "loss", "activation_bytes", "device_bytes", "inflight",
  };
  return (unsigned) kind < PP_N_COUNTER_KINDS ? names[kind] : "?";
}
