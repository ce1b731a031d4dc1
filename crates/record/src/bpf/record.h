/* The few kernel types and constants the recorder's BPF program uses,
 * declared here rather than taken from a generated vmlinux.h. Structs
 * carry preserve_access_index: their field offsets are relocated against
 * the running kernel's BTF when the program is loaded (CO-RE), so only the
 * field names must match the kernel's. Constants are stable uAPI values
 * (include/uapi/linux/bpf.h; arch/x86/entry/syscalls/syscall_64.tbl).
 *
 * The layout of `struct record_event` is shared with the user side
 * (src/event.rs decodes it): change both together and bump
 * RECORD_EVENT_VERSION. */
#ifndef STATSTORM_RECORD_H
#define STATSTORM_RECORD_H

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};

enum {
	BPF_F_NO_PREALLOC = 1,
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};

/* bpf_ringbuf_output flags and bpf_ringbuf_query's question */
enum {
	BPF_RB_NO_WAKEUP = 1,
	BPF_RB_FORCE_WAKEUP = 2,
};
enum {
	BPF_RB_AVAIL_DATA = 0,
};

/* x86-64: a syscall's arguments are di, si, dx, r10, r8, r9; its number
 * is orig_ax (arch/x86/include/asm/ptrace.h). */
struct pt_regs {
	unsigned long r10;
	unsigned long r9;
	unsigned long r8;
	unsigned long dx;
	unsigned long si;
	unsigned long di;
	unsigned long orig_ax;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
} __attribute__((preserve_access_index));

/* x86-64 syscall numbers the recorder follows */
#define NR_read 0
#define NR_write 1
#define NR_open 2
#define NR_close 3
#define NR_stat 4
#define NR_fstat 5
#define NR_lstat 6
#define NR_access 21
#define NR_dup 32
#define NR_dup2 33
#define NR_accept 43
#define NR_clone 56
#define NR_fork 57
#define NR_vfork 58
#define NR_execve 59
#define NR_fcntl 72
#define NR_getdents 78
#define NR_getcwd 79
#define NR_chdir 80
#define NR_fchdir 81
#define NR_rename 82
#define NR_mkdir 83
#define NR_rmdir 84
#define NR_unlink 87
#define NR_readlink 89
#define NR_getdents64 217
#define NR_openat 257
#define NR_mkdirat 258
#define NR_newfstatat 262
#define NR_unlinkat 263
#define NR_renameat 264
#define NR_readlinkat 267
#define NR_faccessat 269
#define NR_accept4 288
#define NR_dup3 292
#define NR_renameat2 316
#define NR_execveat 322
#define NR_statx 332
#define NR_clone3 435
#define NR_openat2 437
#define NR_faccessat2 439

/* fcntl commands that make a new fd */
#define F_DUPFD 0
#define F_DUPFD_CLOEXEC 1030

/* Bytes kept of each path, the terminating NUL included: a longer path is
 * cut and the event says so (RECORD_CUT). */
#define RECORD_PATH 512
/* Bytes kept of what a read() returned (the FastCGI header is 8). */
#define RECORD_DATA 8

#define RECORD_EVENT_VERSION 1

/* flags of an event */
#define RECORD_CUT 1      /* a path was longer than RECORD_PATH - 1 */
#define RECORD_STAT 2     /* st_* fields are valid */
#define COUNT_NOFOLLOW 4  /* counts: newfstatat/statx with AT_SYMLINK_NOFOLLOW */

#define AT_SYMLINK_NOFOLLOW 0x100

/* counters (a per-CPU array summed by the user side) */
#define CNT_UNUSED 0      /* (calls are counted by the user side) */
#define CNT_LOST_RING 1   /* events lost: the ring buffer was full */
#define CNT_LOST_SLOT 2   /* calls lost: too many calls in flight */
#define CNT_CUT 3         /* paths cut at RECORD_PATH - 1 bytes */
#define CNT_COUNTS_FULL 4 /* counts mode: calls beyond the counts map's keys */
#define CNT_PENDING 5     /* bytes written since the reader was last woken (not a count) */
#define CNT_N 6

/* One finished call. Fixed header, then `len1` bytes of the first path
 * (or of read data / getcwd's result / readlink's target when
 * `len2` is 0 and the call has no path), then, at offset RECORD_PATH,
 * `len2` bytes of the second (rename's target, readlink's result).
 * Lengths count the terminating NUL. */
struct record_event {
	__u64 ts_ns;      /* call entry, CLOCK_MONOTONIC */
	__u64 dur_ns;     /* entry to exit */
	__s64 ret;
	__u64 args[6];    /* raw syscall arguments */
	__u64 extra;      /* openat2's how.flags, clone3's flags */
	__s64 st_size;
	__s64 st_mtime;
	__s64 st_ctime;
	__u32 st_mtime_nsec;
	__u32 st_ctime_nsec;
	__u32 st_mode;
	__u32 pid;        /* thread group (process) */
	__u32 tid;        /* thread */
	__u16 nr;         /* syscall number */
	__u16 flags;      /* RECORD_* */
	__u16 len1;
	__u16 len2;
	__u32 pad;
	char buf[2 * RECORD_PATH];
};

/* Counts mode (`record --counts`): calls are counted in the kernel per
 * process x syscall x result x path, in one of two maps (the user side
 * drains the one not written to at the end of each window). COUNT_PATH
 * bytes of the path are kept, the NUL included. */
#define COUNT_PATH 256
/* syscall numbers are below this (x86-64: 439 the highest followed) */
#define COUNT_NR 512

struct count_key {
	__u32 pid;        /* thread group (process) */
	__u16 nr;         /* syscall number */
	__u16 flags;      /* RECORD_CUT, COUNT_NOFOLLOW */
	__s32 err;        /* errno, 0 when the call succeeded */
	__u32 pad;
	char path[COUNT_PATH]; /* NUL-padded; empty without a path */
};

/* Counts mode: per-request histograms of the calls of three classes
 * (REQ_STAT: stat, lstat, newfstatat, statx; REQ_OPEN: open, openat,
 * openat2; REQ_ACCESS: access, faccessat, faccessat2) made between an
 * accept's return and the next accept (a php-fpm worker's request).
 * Bucket 0 holds requests with no call of the class, bucket b > 0 those
 * with 2^(b-1) to 2^b - 1; the last bucket, the rest. Entry
 * c * (REQ_BUCKETS + 1) + REQ_BUCKETS holds the class's calls summed. */
#define REQ_CLASSES 3
#define REQ_BUCKETS 24

struct count_val {
	__u64 calls;
	__u64 dur_ns;     /* entry to exit, summed */
};

#define RECORD_HEADER ((unsigned long)&((struct record_event *)0)->buf)

#endif
