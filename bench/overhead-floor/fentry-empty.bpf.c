/* fentry/fexit on newfstatat's syscall function alone (no tracepoint) */
#include "common.h"
SEC("fentry/__x64_sys_newfstatat") int BPF_PROG(en, void *regs) { return 0; }
SEC("fexit/__x64_sys_newfstatat") int BPF_PROG(ex, void *regs, long ret) { return 0; }
