/* What every faultline BPF program shares: the injection's parameters, set by the loader before the
 * object is loaded (read-only globals, so the verifier sees constants and each injection loads its
 * own copy), the rate and window test, and the counters the injector reports when it ends. */
#pragma once

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

/* Fault when bpf_get_prandom_u32() < fl_threshold: rate × 2^32 (2^32 = always, 0 = never). */
const volatile __u64 fl_threshold = 0;
/* CLOCK_MONOTONIC nanoseconds after which nothing is faulted (0 = no end): the window holds even if
 * the injector is stopped and cannot detach in time. */
const volatile __u64 fl_deadline_ns = 0;
/* The positive errno a failed call returns. */
const volatile __u32 fl_errno = 0;

/* Index 0: calls that matched the request's filter; 1: of those, calls faulted. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} fl_stats SEC(".maps");

static __always_inline void fl_count(__u32 index)
{
	__u64 *n = bpf_map_lookup_elem(&fl_stats, &index);
	if (n)
		__sync_fetch_and_add(n, 1);
}

/* Counts a matching call and decides whether this one is faulted. */
static __always_inline int fl_roll(void)
{
	fl_count(0);
	if (fl_deadline_ns && bpf_ktime_get_ns() >= fl_deadline_ns)
		return 0;
	if ((__u64)bpf_get_prandom_u32() >= fl_threshold)
		return 0;
	fl_count(1);
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
