/* The least per-path counting: sys_exit alone (the arguments read back
 * from the saved registers, no entry program, no clock), the syscall
 * checked against a list, the process against its name ("php"), the path
 * read from the caller and counted in a hash map keyed by pid, syscall,
 * errno and path (the key of `record --counts`). */
#include "common.h"
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax;
} __attribute__((preserve_access_index));
struct key { __u32 pid; __u16 nr; __u16 flags; __s32 err; __u32 pad; char path[256]; };
struct val { __u64 calls; };
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, struct key);
	__type(value, struct val);
} counts SEC(".maps");
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct key);
} scratch SEC(".maps");
static __always_inline int path_arg(long nr)
{
	switch (nr) {
	case 2: case 4: case 6: case 21: case 89: case 59: return 0; /* open stat lstat access readlink execve */
	case 257: case 262: case 332: case 267: case 269: case 439: return 1; /* *at, statx */
	}
	return -1;
}
SEC("tp_btf/sys_exit") int BPF_PROG(ex, struct pt_regs *regs, long ret)
{
	long nr = regs->orig_ax;
	int pa = path_arg(nr);
	if (pa < 0)
		return 0;
	char c[16] = {};
	bpf_get_current_comm(c, sizeof(c));
	if (c[0] != 'p' || c[1] != 'h' || c[2] != 'p')
		return 0;
	__u32 zero = 0;
	struct key *k = bpf_map_lookup_elem(&scratch, &zero);
	if (!k)
		return 0;
	__builtin_memset(k, 0, sizeof(*k));
	k->pid = bpf_get_current_pid_tgid() >> 32;
	k->nr = nr;
	k->err = ret < 0 ? -ret : 0;
	bpf_probe_read_user_str(k->path, sizeof(k->path), (const char *)(pa ? regs->si : regs->di));
	struct val *v = bpf_map_lookup_elem(&counts, k);
	if (!v) {
		struct val nv = { 1 };
		bpf_map_update_elem(&counts, k, &nv, BPF_NOEXIST);
		return 0;
	}
	__sync_fetch_and_add(&v->calls, 1);
	return 0;
}
