/* tp_btf/sys_enter and sys_exit, each returning at once */
#include "common.h"
SEC("tp_btf/sys_enter") int BPF_PROG(en, void *regs, long id) { return 0; }
SEC("tp_btf/sys_exit") int BPF_PROG(ex, void *regs, long ret) { return 0; }
