#!/bin/sh
# run-fuzz.sh SRCROOT OUTDIR [SECONDS]
#
# Builds the libFuzzer targets (fuzz-reader, fuzz-consumers, fuzz-import) with clang
# -fsanitize=fuzzer,address,undefined into OUTDIR, and san-trace-cli (the
# CLI's info, export, render and suggest under ASan + UBSan); runs every
# seed file through the CLI's commands and every corpus input once through
# both targets (the sanitizer run of the consumers over the corpus), then
# fuzzes each target for SECONDS/2 (default 50 in all; 0: no fuzzing, the
# corpus once).  A
# crash, a sanitizer report, a leak, an input over -rss_limit_mb or one
# slower than -timeout is a finding: the script exits 1 and names it.
# Without clang's libFuzzer it exits 77 (skip) with one line saying so.
set -u
src=$1
out=$2
total=${3:-50}
cc=${CLANG:-clang}
ccache=$(command -v ccache || true)
mkdir -p "$out" || exit 1

if ! command -v "$cc" >/dev/null 2>&1; then
  echo "run-fuzz: skipped: no clang (apt-get install clang)"; exit 77
fi
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){return 0;}\n' > "$out/probe.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$out/probe.c" -o "$out/probe" 2>/dev/null; then
  echo "run-fuzz: skipped: $cc cannot link -fsanitize=fuzzer (libFuzzer missing)"; exit 77
fi
cairo_cflags=$(pkg-config --cflags cairo 2>/dev/null)
cairo_flags=$(pkg-config --cflags --libs cairo 2>/dev/null) || {
  echo "run-fuzz: skipped: no cairo development files"; exit 77; }
# the CPU kernels under the bundled model (pp-why-change.c asks it for its costs)
cairo_flags="$cairo_flags $(pkg-config --cflags --libs openblas 2>/dev/null || echo -lopenblas)"

flags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -std=gnu17"
inc="-I$src/probe -I$src/runtime -I$src/ui -I$src/kernels"
probe="$src/probe/pp-trace-reader.c $src/probe/pp-trace-writer.c $src/probe/pp-trace-places.c $src/probe/pp-trace-text.c $src/probe/pp-event.c $src/probe/pp-status.c"
runtime=""
for f in pp-action.c pp-schedule.c pp-schedule-catalog.c pp-schedule-csv.c pp-schedules-pytorch.c \
         pp-schedules-zb.c pp-schedule-dualpipe.c pp-schedule-rules.c pp-validate.c pp-simulate.c \
         pp-schedule-megatron.c pp-closed-form.c pp-suggest.c pp-stuck.c \
         pp-model.c pp-chunk-layout.c; do
  runtime="$runtime $src/runtime/$f"
done
# the one analysis, whatever files it is split into
runtime="$runtime $(ls "$src"/runtime/pp-why*.c "$src"/runtime/pp-analysis*.c | tr '\n' ' ') $src/runtime/pp-straggler.c"
# pp-why-change.c asks the bundled model (pp-model.c, its parts laid out by
# pp-chunk-layout.c) for its cost estimates;
# the model links the CPU kernels (BLAS)
runtime="$runtime $src/kernels/pp-kernels-cpu.c"
# the timeline's model and renderer, whatever files they are split into
ui="$(ls "$src"/ui/pp-timeline-model*.c "$src"/ui/pp-timeline-render*.c | tr '\n' ' ') $src/ui/pp-timeline-fold.c $src/ui/pp-timeline-summary.c $src/ui/pp-timeline-filter.c $src/ui/pp-timeline-host-lane.c $src/ui/pp-heatmap.c"

# Every source is compiled once into OUTDIR/obj (in parallel, with the
# fuzzer's coverage but not its main: -fsanitize=fuzzer-no-link) and linked
# into each program that names it; a source is recompiled when it, a header
# of the tree or this script is newer than its object.
objflags="-g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -std=gnu17"
objinc="-I$src/probe -I$src/runtime -I$src/ui -I$src/kernels -I$src/import -I$src/app/cli"
mkdir -p "$out/obj"
stamp="$out/obj/.headers"
if [ ! -e "$stamp" ] || [ -n "$(find "$src/probe" "$src/runtime" "$src/ui" "$src/kernels" "$src/import" "$src/app/cli" \
       "$src/tests/fuzz/run-fuzz.sh" -name '*.h' -newer "$stamp" -o -name run-fuzz.sh -newer "$stamp" 2>/dev/null)" ]; then
  rm -f "$out"/obj/*.o
  touch "$stamp"
fi
obj_of() { # the object of a source: its path under SRCROOT, / as _
  echo "$out/obj/$(echo "${1#"$src"/}" | tr / _ | sed 's/\.c$/.o/')"
}
build() { # name sources...
  name=$1; shift
  # each source with its object, compiled where missing or older, $(nproc) at once
  for f in "$@"; do printf '%s %s\n' "$f" "$(obj_of "$f")"; done > "$out/$name.objs"
  export cc ccache objflags objinc cairo_cflags
  # shellcheck disable=SC2016
  if ! xargs -P "$(nproc)" -n 2 sh -c '
        if [ ! -e "$2" ] || [ "$1" -nt "$2" ]; then
          # shellcheck disable=SC2086
          $ccache $cc $objflags $objinc $cairo_cflags -c "$1" -o "$2" 2>"$2.log" || { echo "$1:"; cat "$2.log"; exit 255; }
        fi' sh < "$out/$name.objs" >"$out/$name.log" 2>&1; then
    echo "run-fuzz: error: compiling for $name failed:"; cat "$out/$name.log"; exit 1
  fi
  objs=$(cut -d' ' -f2 "$out/$name.objs" | tr '\n' ' ')
  # shellcheck disable=SC2086
  "$cc" $flags $objs -o "$out/$name" $cairo_flags -lm -lpthread 2>"$out/$name.log" || {
    echo "run-fuzz: error: linking $name failed:"; cat "$out/$name.log"; exit 1; }
}
build fuzz-reader "$src/tests/fuzz/fuzz-reader.c" $probe
build fuzz-consumers "$src/tests/fuzz/fuzz-consumers.c" $probe $runtime $ui
# the torch.profiler importer (its JSON reader, gunzip, the converter)
imp="$src/import/pp-json.c $src/import/pp-import-read.c $(ls "$src"/import/pp-import-kineto*.c | tr '\n' ' ') $src/import/pp-import-chrome.c $src/import/pp-import-hash.c"
cairo_flags_plain=$cairo_flags
cairo_flags="$cairo_flags -lz"
inc_plain=$inc
inc="$inc -I$src/import"
build fuzz-import "$src/tests/fuzz/fuzz-import.c" $imp $probe $runtime
inc=$inc_plain
cairo_flags=$cairo_flags_plain
# the CLI's trace commands under ASan + UBSan (no fuzzer: a plain main)
cli="$(ls "$src"/app/cli/cli-trace*.c | tr '\n' ' ') $src/app/cli/cli-render.c $src/app/cli/cli-heatmap.c $src/app/cli/cli-suggest.c \
     $src/app/cli/cli-common.c $src/app/cli/cli-output.c $src/app/cli/cli-plan.c \
     $src/app/cli/cli-replicas.c $src/app/cli/cli-processes.c $src/app/cli/cli-select.c $src/app/cli/cli-clock.c"
flags_fuzz=$flags
flags="-g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -std=gnu17"
inc="$inc -I$src/app/cli"
build san-trace-cli "$src/tests/fuzz/san-trace-cli.c" $cli $probe $runtime $ui
flags=$flags_fuzz

# The corpus: real traces (tests/fuzz/corpus) and the crafted ones
# (tests/data/hostile); what fuzzing finds new stays in OUTDIR/corpus.
corpus="$out/corpus"
mkdir -p "$corpus"
cp "$src"/tests/fuzz/corpus/*.pptrace "$src"/tests/data/hostile/*.pptrace "$corpus"/ 2>/dev/null

# fontconfig (under cairo's text) keeps its caches for the process's life:
# not ours, not a finding.
printf 'leak:libfontconfig\nleak:libcairo\nleak:libpixman\nleak:libfreetype\n' > "$out/lsan.supp"
export LSAN_OPTIONS="suppressions=$out/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
limits="-rss_limit_mb=1024 -malloc_limit_mb=1024 -timeout=10"
status=0

# The consumers of the CLI over every file of the corpus, once: an exit of
# 0 or 1 (a one-line error) is an answer; a sanitizer report exits 99.
n_files=0
for f in "$src"/tests/fuzz/corpus/*.pptrace "$src"/tests/data/hostile/*.pptrace; do
  n_files=$((n_files + 1))
  for cmd in "info $f" "export $f -o $out/x.json" "export $f --format csv -o $out/x.csv" \
             "export $f --format why -o $out/x.why.json" "render $f -o $out/x.png" \
             "render $f --heatmap -o $out/h.png" "suggest $f"; do
    # shellcheck disable=SC2086
    ASAN_OPTIONS="$ASAN_OPTIONS:exitcode=99" UBSAN_OPTIONS="$UBSAN_OPTIONS:exitcode=99" \
      OPENBLAS_NUM_THREADS=1 "$out/san-trace-cli" $cmd >"$out/san.out" 2>"$out/san.err"
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 1 ]; then
      echo "run-fuzz: FINDING: san-trace-cli $cmd exited $rc:"; tail -30 "$out/san.err"; status=1
    fi
  done
done
echo "run-fuzz: san-trace-cli: info, export (chrome, csv, why), render (--heatmap too), suggest over $n_files seed files"
# the importer's seeds: small torch.profiler traces (JSON, one gzip'd) and
# the small hostile ones (tests/fuzz/make-import-seeds.py); its heavy seeds
# (a gzip bomb, nesting, the budget across files: tens of MiB gunzipped)
# are run once with the corpus, under the same limits, and not fuzzed from:
# a second each under the sanitizers would starve the fuzzing.
corpus_json="$out/corpus-json"
mkdir -p "$corpus_json"
cp "$src"/tests/fuzz/corpus-json/* "$corpus_json"/ 2>/dev/null
for t in fuzz-reader fuzz-consumers fuzz-import; do
  c=$corpus
  once=""
  [ "$t" = fuzz-import ] && c=$corpus_json && once="$src/tests/fuzz/corpus-json-heavy"
  # every input of the corpus once
  # shellcheck disable=SC2086
  if ! "$out/$t" $limits -runs=0 -artifact_prefix="$out/$t-" "$c" $once >"$out/$t.corpus.log" 2>&1; then
    echo "run-fuzz: FINDING: $t on the corpus:"; tail -40 "$out/$t.corpus.log"; status=1; continue
  fi
  secs=$((total / 2))
  # SECONDS 0: the corpus once, no fuzzing (CI's test-fuzz; test-fuzz-long fuzzes)
  if [ "$secs" -eq 0 ]; then
    echo "run-fuzz: $t: $(ls "$c" | wc -l) corpus inputs once, no finding"; continue
  fi
  # shellcheck disable=SC2086
  if ! "$out/$t" $limits -max_total_time="$secs" -max_len=65536 -print_final_stats=1 \
       -artifact_prefix="$out/$t-" "$c" >"$out/$t.log" 2>&1; then
    echo "run-fuzz: FINDING: $t (artifact under $out/$t-*):"; tail -40 "$out/$t.log"; status=1; continue
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$t.log" | grep -o '[0-9]*$')
  echo "run-fuzz: $t: ${runs:-?} executions in ${secs} s, no finding"
done
exit $status
