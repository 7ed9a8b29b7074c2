/* BPF LSM fault programs, for kernels that load them (CONFIG_BPF_LSM, "bpf" in the active LSM list,
 * and no policy refusing trampolines). An LSM hook can only deny with an errno: reads, writes, opens
 * and mmaps under a directory fail with EIO (latent sector errors), process creation fails, accept()
 * fails. Processes are chosen by their cgroup v2 id. The kernel structures are declared with only
 * the fields read, and relocated against the running kernel's BTF at load (CO-RE), so no vmlinux.h
 * of the build machine is baked in. */
#include <linux/bpf.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.h"

/* The cgroup v2 id (its directory's inode number) whose processes are faulted. */
const volatile __u64 fl_cgroup_id = 0;
/* The directory under which files are faulted: its superblock's kernel dev_t and its inode number
 * (0 and 0: every file). */
const volatile __u32 fl_dev = 0;
const volatile __u64 fl_ino = 0;
/* file_permission: MAY_WRITE (2) and/or MAY_READ (4) calls that are faulted. */
const volatile __u32 fl_mask = 0;

struct super_block {
	__u32 s_dev;
} __attribute__((preserve_access_index));

struct inode {
	unsigned long i_ino;
} __attribute__((preserve_access_index));

struct dentry {
	struct dentry *d_parent;
	struct inode *d_inode;
	struct super_block *d_sb;
} __attribute__((preserve_access_index));

struct path {
	struct dentry *dentry;
} __attribute__((preserve_access_index));

struct file {
	struct path f_path;
} __attribute__((preserve_access_index));

struct task_struct;
struct socket;

#define MAX_DEPTH 32

static __always_inline int in_scope(void)
{
	return bpf_get_current_cgroup_id() == fl_cgroup_id;
}

/* Whether the file is the chosen directory or lies under it (up to MAX_DEPTH levels; a bounded loop, which
 * every kernel with BPF LSM verifies). */
static __always_inline int under_dir(struct file *file)
{
	if (fl_ino == 0)
		return 1;
	struct dentry *d = BPF_CORE_READ(file, f_path.dentry);
	if (BPF_CORE_READ(d, d_sb, s_dev) != fl_dev)
		return 0;
	for (int i = 0; i < MAX_DEPTH; i++) {
		if (!d)
			return 0;
		if (BPF_CORE_READ(d, d_inode, i_ino) == fl_ino)
			return 1;
		struct dentry *parent = BPF_CORE_READ(d, d_parent);
		if (parent == d)
			return 0;
		d = parent;
	}
	return 0;
}

/* An earlier denial (ret != 0) stands; otherwise fail the call when it is chosen. */
static __always_inline int decide(int ret, int matched)
{
	if (ret != 0)
		return ret;
	if (matched && fl_roll())
		return -(int)fl_errno;
	return 0;
}

SEC("lsm/file_permission")
int BPF_PROG(fl_file_permission, struct file *file, int mask, int ret)
{
	return decide(ret, in_scope() && (mask & fl_mask) && under_dir(file));
}

SEC("lsm/file_open")
int BPF_PROG(fl_file_open, struct file *file, int ret)
{
	return decide(ret, in_scope() && under_dir(file));
}

SEC("lsm/mmap_file")
int BPF_PROG(fl_mmap_file, struct file *file, unsigned long reqprot, unsigned long prot,
	     unsigned long flags, int ret)
{
	return decide(ret, in_scope() && file && under_dir(file));
}

SEC("lsm/task_alloc")
int BPF_PROG(fl_task_alloc, struct task_struct *task, unsigned long clone_flags, int ret)
{
	return decide(ret, in_scope());
}

SEC("lsm/socket_accept")
int BPF_PROG(fl_socket_accept, struct socket *sock, struct socket *newsock, int ret)
{
	return decide(ret, in_scope());
}
