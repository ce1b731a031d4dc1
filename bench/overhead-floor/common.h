/* Programs of scripts/bench-overhead-floor: the least a syscall tracer on
 * the raw syscall tracepoints can cost the 1M stat loop (not statstorm's
 * recorder; see bench/2026-11-27-overhead.md). */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
char LICENSE[] SEC("license") = "GPL";
