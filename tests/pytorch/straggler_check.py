"""straggler_check.py — what test-torch-mesh (ddp) and test-megatron (dp)
check of a job run once more with one process slowed (issue 38)."""

import json


def compare(cli, env, run, fail, slow_trace, even_trace, slow_g, place=None):
    """The slowed job's straggler table (info and export --format why) names
    process slow_g first (at place [pp, dp, tp] where given); its predicted
    saving a step agrees within 35 % with the saving measured (the slowed
    job's median step less the job's not slowed: two measurements of the
    same test, no bound on a time); the job not slowed names no straggler
    worth a quarter of that.  run(cmd, env, what) runs a command or fails;
    returns what to add to the ok line."""
    def why(trace):
        return json.loads(run([cli, "export", trace, "--format", "why", "-o", "-"], env,
                              "export --format why").stdout)

    ws, we = why(slow_trace), why(even_trace)
    first = ws["stragglers"][0] if ws["stragglers"] else None
    if first is None or first["process"] != slow_g or (
            place is not None and [first["pp"], first["dp"], first["tp"]] != list(place[:3])):
        fail(f"the slowed job's first straggler is {first}, not process {slow_g} at {place}")
    info = run([cli, "info", slow_trace], env, "info of the slowed job").stdout.splitlines()
    at = [i for i, line in enumerate(info) if line.startswith("stragglers (")]
    if len(at) != 1 or info[at[0] + 3].split()[0] != str(slow_g):
        fail("info's straggler table does not name process %d first:\n%s" % (slow_g, "\n".join(info[-12:])))
    measured = ws["analysis"]["median_step"] - we["analysis"]["median_step"]
    predicted = first["saving_s"]
    if not measured > 0 or abs(predicted - measured) > 0.35 * measured:
        fail(f"predicted saving {predicted:.4f} s a step, measured {measured:.4f} s: not within 35 %")
    even = max((x["saving_s"] for x in we["stragglers"]), default=0)
    if not even < 0.25 * measured:
        fail(f"the job not slowed names a straggler saving {even:.4f} s, a quarter of {measured:.4f} s or more")
    return (f"; slowed process {slow_g} named first, predicted saving {predicted * 1e3:.0f} ms against "
            f"{measured * 1e3:.0f} ms measured, the job not slowed at most {even * 1e3:.1f} ms")
