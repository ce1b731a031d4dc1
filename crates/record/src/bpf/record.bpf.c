// SPDX-License-Identifier: Dual MIT/GPL
/* statstorm record: the file syscalls of the followed processes, one event
 * per finished call, through a ring buffer.
 *
 * Two BTF tracepoints on the syscall path (tp_btf/sys_enter, sys_exit:
 * include/trace/events/syscalls.h) see every syscall of the machine; a
 * call is kept only when its number is one the models read (`wanted`) and
 * its process is followed (`followed_pids`: pids given, children of
 * followed processes added at fork, processes whose name starts with
 * `comm`). The
 * entry saves the arguments per thread (`inflight`); the exit reads the
 * paths and the stat buffer from the caller's memory (still there: the
 * call has returned into it, but for execve, whose path is saved at entry)
 * and writes one `struct record_event` of the needed length. Nothing is
 * dropped silently: a full ring buffer, a full `inflight` map and a cut
 * path are counted (`counters`) and the user side reports them.
 *
 * Counts mode (`counts_mode`, for captures of hours): the exit adds the
 * call to a count per process x syscall x errno x path in a bounded hash
 * map instead (two maps, one written while the user side drains the
 * other); calls that find it full are counted per syscall alone. */
#include "record.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* bytes of struct stat / struct statx read (both fit) */
#define STAT_BYTES 128

/* pending bytes that wake the reader */
#define WAKE_BYTES (256 << 10)

/* set by the user side before load */
const volatile __u32 comm_len = 0;
const volatile char comm[16] = {};
/* 1: count calls in the kernel (counts0/counts1) instead of sending each */
const volatile __u32 counts_mode = 0;

/* counts mode: the map written to (0: counts0, 1: counts1); the user side
 * flips it at the end of a window, waits for the programs running to
 * finish, and drains the other */
volatile __u32 counts_cur = 0;

struct start {
	__u64 ts_ns;
	__u64 args[6];
	__u32 nr;
	/* counts mode: in a request (an accept returned), and its calls so
	 * far per REQ_* class */
	__u32 in_request;
	__u32 req[REQ_CLASSES];
	/* the thread whose slot this is */
	__u32 tid;
};

struct exec_path {
	char path[RECORD_PATH];
	__u16 len;
};

/* Followed processes: one bit per pid (pids are below 2^22,
 * PID_MAX_LIMIT in include/linux/threads.h), in words of 64. Every
 * syscall of every process on the machine asks it, twice, so it is an
 * array, whose lookup the verifier turns into an address computation
 * (no helper call, no hashing), and 512 KiB whatever the number of
 * processes. */
#define PID_WORDS (1 << 16)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PID_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} followed_pids SEC(".maps");

/* Under --comm: processes whose name was compared and did not match, so
 * that each of their calls does not compare it again (cleared when the
 * process execs, which changes its name, and when it exits). A process
 * that renames itself (prctl PR_SET_NAME) after its first call is not
 * picked up. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PID_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} checked_pids SEC(".maps");

/* The recorded command's child before its exec: its calls between fork
 * and exec are the recorder's own, not recorded; its execve is, and
 * makes it followed. Looked up for execve calls only. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u8);
} before_exec SEC(".maps");

/* The call in flight of each thread: the slot of its thread id (masked by
 * `slot_mask`) in a plain array, whose lookups the verifier inlines.
 * Task-local storage cost about 0.15 us a call at entry and again at exit
 * here (the 1M stat loop: 1.13x untraced without it, 1.35x with it and
 * nothing recorded). The user side sizes the array from the kernel's
 * pid_max (at most 2^16 slots): below that every thread has its own slot;
 * above, two threads whose ids agree in the low 16 bits and are both in a
 * call share one, and the call overwritten is counted lost. */
const volatile __u32 slot_mask = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct start);
} inflight SEC(".maps");


struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct exec_path);
} execs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct record_event);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exec_path);
} exec_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_N);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* counts mode: bounded (max_entries set by the user side, not
 * preallocated: memory grows with the keys seen, up to the bound) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, struct count_key);
	__type(value, struct count_val);
} counts0 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, struct count_key);
	__type(value, struct count_val);
} counts1 SEC(".maps");

/* counts mode: calls that found the map full, per syscall (index: the map
 * written to x COUNT_NR + the syscall number), without process, path or
 * result */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * COUNT_NR);
	__type(key, __u32);
	__type(value, struct count_val);
} counts_over SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct count_key);
} count_scratch SEC(".maps");

/* counts mode: the per-request histograms (record.h), cumulative */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, REQ_CLASSES * (REQ_BUCKETS + 1));
	__type(key, __u32);
	__type(value, __u64);
} req_hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 20);
} events SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);
	if (c)
		*c += 1;
}

static __always_inline bool wanted(long nr)
{
	switch (nr) {
	case NR_read: case NR_write: case NR_open: case NR_close:
	case NR_stat: case NR_fstat: case NR_lstat: case NR_access:
	case NR_dup: case NR_dup2: case NR_accept: case NR_clone:
	case NR_fork: case NR_vfork: case NR_execve: case NR_fcntl:
	case NR_getdents: case NR_getcwd: case NR_chdir: case NR_fchdir:
	case NR_rename: case NR_mkdir: case NR_rmdir: case NR_unlink:
	case NR_readlink: case NR_getdents64: case NR_openat: case NR_mkdirat:
	case NR_newfstatat: case NR_unlinkat: case NR_renameat:
	case NR_readlinkat: case NR_faccessat: case NR_accept4: case NR_dup3:
	case NR_renameat2: case NR_execveat: case NR_statx: case NR_clone3:
	case NR_openat2: case NR_faccessat2:
		return true;
	}
	return false;
}

/* The argument holding the call's (first) path, or -1. */
static __always_inline int path_arg(long nr)
{
	switch (nr) {
	case NR_open: case NR_stat: case NR_lstat: case NR_access:
	case NR_chdir: case NR_mkdir: case NR_rmdir: case NR_unlink:
	case NR_readlink: case NR_rename: case NR_execve:
		return 0;
	case NR_openat: case NR_mkdirat: case NR_newfstatat: case NR_unlinkat:
	case NR_readlinkat: case NR_faccessat: case NR_faccessat2:
	case NR_statx: case NR_openat2: case NR_renameat: case NR_renameat2:
	case NR_execveat:
		return 1;
	}
	return -1;
}

/* The argument pointing at the struct stat / struct statx, or -1. */
static __always_inline int stat_arg(long nr)
{
	switch (nr) {
	case NR_stat: case NR_lstat: case NR_fstat:
		return 1;
	case NR_newfstatat:
		return 2;
	case NR_statx:
		return 4;
	}
	return -1;
}

static __always_inline __u64 *pid_word(void *map, __u32 tgid)
{
	__u32 w = (tgid >> 6) & (PID_WORDS - 1);
	return bpf_map_lookup_elem(map, &w);
}

static __always_inline bool has_pid(void *map, __u32 tgid)
{
	__u64 *v = pid_word(map, tgid);
	return v && ((*v >> (tgid & 63)) & 1);
}

/* (atomic: other CPUs set and clear other bits of the word) */
static __always_inline void set_pid(void *map, __u32 tgid)
{
	__u64 *v = pid_word(map, tgid);
	if (v)
		__sync_fetch_and_or(v, 1ULL << (tgid & 63));
}

static __always_inline void clear_pid(void *map, __u32 tgid)
{
	__u64 *v = pid_word(map, tgid);
	if (v && ((*v >> (tgid & 63)) & 1))
		__sync_fetch_and_and(v, ~(1ULL << (tgid & 63)));
}

static __always_inline bool is_followed(__u32 tgid)
{
	return has_pid(&followed_pids, tgid);
}

static __always_inline void set_followed(__u32 tgid)
{
	set_pid(&followed_pids, tgid);
}

static __always_inline bool is_exec(long id)
{
	return id == NR_execve || id == NR_execveat;
}

static __always_inline bool followed(__u32 tgid, long id)
{
	if (is_followed(tgid))
		return true;
	if (is_exec(id) && bpf_map_lookup_elem(&before_exec, &tgid))
		return true;
	if (comm_len == 0 || has_pid(&checked_pids, tgid))
		return false;
	char c[16] = {};
	bpf_get_current_comm(c, sizeof(c));
	for (int i = 0; i < 16; i++) {
		if (i >= comm_len)
			break;
		if (c[i] != comm[i]) {
			set_pid(&checked_pids, tgid);
			return false;
		}
	}
	set_followed(tgid);
	return true;
}

/* Adds one call to the key's count in `map`; a call that finds the map
 * full goes to `counts_over` under its syscall alone. */
static __always_inline void count_into(void *map, struct count_key *k, __u64 dur, __u32 cur)
{
	struct count_val *v = bpf_map_lookup_elem(map, k);
	if (!v) {
		struct count_val nv = { .calls = 1, .dur_ns = dur };
		long r = bpf_map_update_elem(map, k, &nv, BPF_NOEXIST);
		if (r == 0)
			return;
		/* another CPU inserted the key first (-EEXIST), or the map is
		 * full */
		v = bpf_map_lookup_elem(map, k);
		if (!v) {
			__u32 i = cur * COUNT_NR + (k->nr & (COUNT_NR - 1));
			struct count_val *o = bpf_map_lookup_elem(&counts_over, &i);
			if (o) {
				o->calls += 1;
				o->dur_ns += dur;
			}
			count(CNT_COUNTS_FULL);
			return;
		}
	}
	__sync_fetch_and_add(&v->calls, 1);
	__sync_fetch_and_add(&v->dur_ns, dur);
}

/* The REQ_* class of a syscall, or -1. */
static __always_inline int req_class(long nr)
{
	switch (nr) {
	case NR_stat: case NR_lstat: case NR_newfstatat: case NR_statx:
		return 0;
	case NR_open: case NR_openat: case NR_openat2:
		return 1;
	case NR_access: case NR_faccessat: case NR_faccessat2:
		return 2;
	}
	return -1;
}

/* The histogram bucket of `v` calls: 0 for none, else floor(log2 v) + 1,
 * at most REQ_BUCKETS - 1. */
static __always_inline __u32 req_bucket(__u32 v)
{
	if (v == 0)
		return 0;
	__u32 b = 1;
	if (v >= 1 << 16) { v >>= 16; b += 16; }
	if (v >= 1 << 8) { v >>= 8; b += 8; }
	if (v >= 1 << 4) { v >>= 4; b += 4; }
	if (v >= 1 << 2) { v >>= 2; b += 2; }
	if (v >= 1 << 1) { b += 1; }
	return b < REQ_BUCKETS ? b : REQ_BUCKETS - 1;
}

/* Counts mode: the request `s` was serving has ended (its worker is back
 * in accept): its calls go into the histograms. */
static __always_inline void end_request(struct start *s)
{
	for (int c = 0; c < REQ_CLASSES; c++) {
		__u32 i = c * (REQ_BUCKETS + 1) + req_bucket(s->req[c]);
		__u64 *h = bpf_map_lookup_elem(&req_hist, &i);
		if (h)
			*h += 1;
		i = c * (REQ_BUCKETS + 1) + REQ_BUCKETS;
		h = bpf_map_lookup_elem(&req_hist, &i);
		if (h)
			*h += s->req[c];
		s->req[c] = 0;
	}
	s->in_request = 0;
}

/* Counts mode: the finished call `s` (returned `ret`) counted under its
 * process, syscall, errno and path. */
static __always_inline void count_call(struct start *s, long ret, __u32 tgid, __u32 tid, __u64 now)
{
	__u32 zero = 0;
	struct count_key *k = bpf_map_lookup_elem(&count_scratch, &zero);
	if (!k)
		return;
	long nr = s->nr;
	__builtin_memset(k, 0, sizeof(*k));
	k->pid = tgid;
	k->nr = nr;
	k->err = (ret < 0 && ret >= -4095) ? -ret : 0;
	long n = 0;
	int pa = path_arg(nr);
	if (nr == NR_execve || nr == NR_execveat) {
		struct exec_path *x = bpf_map_lookup_elem(&execs, &tid);
		if (x) {
			n = bpf_probe_read_kernel_str(k->path, COUNT_PATH, x->path);
			bpf_map_delete_elem(&execs, &tid);
		}
	} else if (pa >= 0 && pa < 6) {
		n = bpf_probe_read_user_str(k->path, COUNT_PATH, (const char *)s->args[pa]);
	}
	if (n >= COUNT_PATH) {
		k->flags |= RECORD_CUT;
		count(CNT_CUT);
	}
	/* an lstat-like call: a step of a realpath walk (R53) */
	if (n > 1 && ((nr == NR_newfstatat && (s->args[3] & AT_SYMLINK_NOFOLLOW)) ||
		      (nr == NR_statx && (s->args[2] & AT_SYMLINK_NOFOLLOW))))
		k->flags |= COUNT_NOFOLLOW;
	if (nr == NR_accept || nr == NR_accept4) {
		if (ret >= 0) {
			s->in_request = 1;
			s->req[0] = s->req[1] = s->req[2] = 0;
		}
	} else if (s->in_request) {
		int c = req_class(nr);
		if (c >= 0 && c < REQ_CLASSES)
			s->req[c] += 1;
	}
	__u64 dur = now - s->ts_ns;
	__u32 cur = counts_cur & 1;
	if (cur)
		count_into(&counts1, k, dur, cur);
	else
		count_into(&counts0, k, dur, cur);
}

/* The slot of thread `tid`, taken over from another thread if need be
 * (that thread's call in flight, if any, is lost and counted). */
static __always_inline struct start *slot_of(__u32 tid)
{
	__u32 k = tid & slot_mask;
	struct start *s = bpf_map_lookup_elem(&inflight, &k);
	if (s && s->tid != tid) {
		if (s->ts_ns != 0)
			count(CNT_LOST_SLOT);
		s->tid = tid;
		s->ts_ns = 0;
		s->in_request = 0;
		s->req[0] = s->req[1] = s->req[2] = 0;
	}
	return s;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(ssrec_enter, struct pt_regs *regs, long id)
{
	if (!wanted(id))
		return 0;
	__u64 pt = bpf_get_current_pid_tgid();
	__u32 tgid = pt >> 32, tid = (__u32)pt;
	if (!followed(tgid, id))
		return 0;
	/* fcntl only when it makes a new fd */
	unsigned long a1 = regs->si;
	if (id == NR_fcntl && a1 != F_DUPFD && a1 != F_DUPFD_CLOEXEC)
		return 0;
	struct start *s = slot_of(tid);
	if (!s) {
		count(CNT_LOST_SLOT);
		return 0;
	}
	/* direct loads through the BTF-typed pointer (no helper call) */
	s->args[0] = regs->di;
	s->args[1] = a1;
	s->args[2] = regs->dx;
	s->args[3] = regs->r10;
	s->args[4] = regs->r8;
	s->args[5] = regs->r9;
	s->nr = id;
	s->ts_ns = bpf_ktime_get_ns();
	if (counts_mode && s->in_request && (id == NR_accept || id == NR_accept4))
		end_request(s);
	if (is_exec(id)) {
		/* the recorded command's child is followed from its execve on
		 * (if the exec fails, the child exits) */
		if (bpf_map_lookup_elem(&before_exec, &tgid)) {
			set_followed(tgid);
			bpf_map_delete_elem(&before_exec, &tgid);
		}
		/* the path is gone once the new program runs: kept now */
		__u32 zero = 0;
		struct exec_path *x = bpf_map_lookup_elem(&exec_scratch, &zero);
		if (x) {
			const char *p = (const char *)s->args[id == NR_execve ? 0 : 1];
			long n = bpf_probe_read_user_str(x->path, sizeof(x->path), p);
			x->len = n > 0 ? n : 0;
			bpf_map_update_elem(&execs, &tid, x, BPF_ANY);
		}
	}
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(ssrec_exit, struct pt_regs *regs, long ret)
{
	__u64 pt = bpf_get_current_pid_tgid();
	__u32 tgid = pt >> 32, tid = (__u32)pt;
	/* the common case first, with no helper call: a process not
	 * followed (under --comm, a process may become followed at any call) */
	if (!is_followed(tgid) && (comm_len == 0 || has_pid(&checked_pids, tgid)))
		return 0;
	__u32 k = tid & slot_mask;
	struct start *s = bpf_map_lookup_elem(&inflight, &k);
	if (!s)
		return 0;
	if (s->tid != tid || s->ts_ns == 0) {
		/* An accept in flight when the recording began (an idle
		 * php-fpm worker): its return starts a request, so it is kept,
		 * timed at its return (the arguments are still in the
		 * registers; no duration) */
		long id = regs->orig_ax;
		if (id != NR_accept && id != NR_accept4)
			return 0;
		if (!followed(tgid, id))
			return 0;
		s = slot_of(tid);
		if (!s)
			return 0;
		s->ts_ns = bpf_ktime_get_ns();
		s->nr = id;
		s->args[0] = regs->di;
		s->args[1] = regs->si;
		s->args[2] = regs->dx;
		s->args[3] = regs->r10;
	}
	__u64 now = bpf_ktime_get_ns();
	long nr = s->nr;

	if (counts_mode) {
		count_call(s, ret, tgid, tid, now);
		goto done;
	}
	__u32 zero = 0;
	struct record_event *e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		goto done;
	e->ts_ns = s->ts_ns;
	e->dur_ns = now - s->ts_ns;
	e->ret = ret;
	for (int i = 0; i < 6; i++)
		e->args[i] = s->args[i];
	e->extra = 0;
	e->pid = tgid;
	e->tid = tid;
	e->nr = nr;
	e->flags = 0;
	e->len1 = 0;
	e->len2 = 0;
	e->pad = 0;

	int pa = path_arg(nr);
	if (nr == NR_execve || nr == NR_execveat) {
		struct exec_path *x = bpf_map_lookup_elem(&execs, &tid);
		if (x) {
			__u16 n = x->len;
			if (n > RECORD_PATH)
				n = RECORD_PATH;
			bpf_probe_read_kernel(e->buf, RECORD_PATH, x->path);
			e->len1 = n;
			bpf_map_delete_elem(&execs, &tid);
		}
	} else if (pa >= 0 && pa < 6) {
		long n = bpf_probe_read_user_str(e->buf, RECORD_PATH, (const char *)s->args[pa]);
		e->len1 = n > 0 ? n : 0;
	} else if (nr == NR_getcwd && ret > 0) {
		long n = bpf_probe_read_user_str(e->buf, RECORD_PATH, (const char *)s->args[0]);
		e->len1 = n > 0 ? n : 0;
	} else if (nr == NR_read && ret > 0) {
		__u32 n = ret < RECORD_DATA ? ret : RECORD_DATA;
		n &= 15;
		if (n > 0 && bpf_probe_read_user(e->buf, n, (const void *)s->args[1]) == 0)
			e->len1 = n;
	}
	if (e->len1 >= RECORD_PATH) {
		e->flags |= RECORD_CUT;
		count(CNT_CUT);
	}

	/* rename's target; readlink's result (not NUL-terminated) */
	if (nr == NR_rename || nr == NR_renameat || nr == NR_renameat2) {
		const char *p = (const char *)s->args[nr == NR_rename ? 1 : 3];
		long n = bpf_probe_read_user_str(e->buf + RECORD_PATH, RECORD_PATH, p);
		e->len2 = n > 0 ? n : 0;
		if (e->len2 >= RECORD_PATH) {
			e->flags |= RECORD_CUT;
			count(CNT_CUT);
		}
	} else if ((nr == NR_readlink || nr == NR_readlinkat) && ret > 0) {
		__u32 n = ret < RECORD_PATH - 1 ? ret : RECORD_PATH - 1;
		n &= RECORD_PATH - 1;
		const void *p = (const void *)s->args[nr == NR_readlink ? 1 : 2];
		if (n > 0 && bpf_probe_read_user(e->buf + RECORD_PATH, n, p) == 0)
			e->len2 = n;
	}

	if (nr == NR_openat2) {
		/* struct open_how: __u64 flags first */
		bpf_probe_read_user(&e->extra, 8, (const void *)s->args[2]);
	} else if (nr == NR_clone3) {
		/* struct clone_args: __u64 flags first */
		bpf_probe_read_user(&e->extra, 8, (const void *)s->args[0]);
	}

	int sa = stat_arg(nr);
	if (ret == 0 && sa >= 0 && sa < 6 && e->len2 == 0) {
		/* the buffer read once into the unused second half */
		char *st = e->buf + RECORD_PATH;
		if (bpf_probe_read_user(st, STAT_BYTES, (const void *)s->args[sa]) == 0) {
			if (nr == NR_statx) {
				/* struct statx: stx_mode u16 at 28, stx_size at
				 * 40, stx_ctime at 96, stx_mtime at 112 ({s64
				 * sec, u32 nsec}) */
				e->st_mode = *(__u16 *)(st + 28);
				e->st_size = *(__s64 *)(st + 40);
				e->st_ctime = *(__s64 *)(st + 96);
				e->st_ctime_nsec = *(__u32 *)(st + 104);
				e->st_mtime = *(__s64 *)(st + 112);
				e->st_mtime_nsec = *(__u32 *)(st + 120);
			} else {
				/* x86-64 struct stat: st_mode at 24, st_size at
				 * 48, st_mtime at 88 (+nsec 96), st_ctime at
				 * 104 (+nsec 112) */
				e->st_mode = *(__u32 *)(st + 24);
				e->st_size = *(__s64 *)(st + 48);
				e->st_mtime = *(__s64 *)(st + 88);
				e->st_mtime_nsec = *(__u32 *)(st + 96);
				e->st_ctime = *(__s64 *)(st + 104);
				e->st_ctime_nsec = *(__u32 *)(st + 112);
			}
			e->flags |= RECORD_STAT;
		}
	}

	__u64 size;
	if (e->len2 > 0)
		size = RECORD_HEADER + RECORD_PATH + e->len2;
	else
		size = RECORD_HEADER + e->len1;
	if (size > sizeof(*e))
		size = sizeof(*e);
	/* The reader is woken once this CPU has written WAKE_BYTES since its
	 * last wakeup (it also reads every 100 ms): a wakeup per call would
	 * cost the traced process more than the call itself (measured: 1M stat
	 * loop 3.8x slower with one). Counted per CPU rather than asking the
	 * ring buffer (bpf_ringbuf_query), whose positions the reader on
	 * another CPU keeps writing: reading them was a cache miss a call. */
	__u64 wake = BPF_RB_NO_WAKEUP;
	__u32 pk = CNT_PENDING;
	__u64 *pending = bpf_map_lookup_elem(&counters, &pk);
	if (pending) {
		*pending += size;
		if (*pending >= WAKE_BYTES) {
			*pending = 0;
			wake = BPF_RB_FORCE_WAKEUP;
		}
	}
	if (bpf_ringbuf_output(&events, e, size, wake))
		count(CNT_LOST_RING);
done:
	s->ts_ns = 0; /* consumed */
	return 0;
}

/* Children of followed processes are followed from their creation on
 * (before they run: the tracepoint fires in the parent, in fork). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(ssrec_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	if (!is_followed(ptgid))
		return 0;
	set_followed(BPF_CORE_READ(child, tgid));
	return 0;
}

/* A process gone is no longer followed (its pid may be reused). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ssrec_task_exit, struct task_struct *t)
{
	__u32 pid = BPF_CORE_READ(t, pid);
	__u32 tgid = BPF_CORE_READ(t, tgid);
	if (pid == tgid) {
		clear_pid(&followed_pids, tgid);
		clear_pid(&checked_pids, tgid);
	}
	return 0;
}

/* An exec changes the process's name: under --comm it is compared again
 * at its next call. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(ssrec_exec, struct task_struct *p)
{
	if (comm_len != 0)
		clear_pid(&checked_pids, BPF_CORE_READ(p, tgid));
	return 0;
}
