/* tp_btf/sys_exit alone, returning at once */
#include "common.h"
SEC("tp_btf/sys_exit") int BPF_PROG(ex, void *regs, long ret) { return 0; }
