/* Cgroup-attached fault programs: they run only for sockets of processes in the cgroup v2 directory
 * (and its descendants) they are attached to, so a restarted process in the same container is
 * faulted again and nothing outside is touched. They need CONFIG_CGROUP_BPF and, for a chosen errno,
 * bpf_set_retval (Linux 5.18). */
#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include "common.h"

/* Filters on the remote end, host byte order for the port; 0 matches any. */
const volatile __u32 fl_port = 0;
/* IPPROTO_TCP or IPPROTO_UDP; 0 matches any. */
const volatile __u32 fl_proto = 0;
/* An IPv4 address in network byte order; 0 matches any. */
const volatile __u32 fl_addr4 = 0;
/* An IPv6 address in network byte order; all zero matches any. */
const volatile __u32 fl_addr6[4] = {0, 0, 0, 0};
/* Whether an address filter is set at all: an IPv4-only filter never matches an IPv6 peer. */
const volatile __u32 fl_has_addr = 0;

static __always_inline int matches_proto(__u32 protocol)
{
	return fl_proto == 0 || fl_proto == protocol;
}

static __always_inline int matches_port(__u16 port_host)
{
	return fl_port == 0 || fl_port == port_host;
}

static __always_inline int matches_addr4(__u32 addr)
{
	return !fl_has_addr || (fl_addr4 != 0 && fl_addr4 == addr);
}

static __always_inline int matches_addr6(const __u32 *addr)
{
	if (!fl_has_addr)
		return 1;
	if (fl_addr4 != 0)
		return 0;
	return addr[0] == fl_addr6[0] && addr[1] == fl_addr6[1] && addr[2] == fl_addr6[2] &&
	       addr[3] == fl_addr6[3];
}

/* 1 lets the call through; 0 with bpf_set_retval fails it with fl_errno. */
static __always_inline int verdict(int matched)
{
	if (!matched || !fl_roll())
		return 1;
	bpf_set_retval(-(int)fl_errno);
	return 0;
}

static __always_inline int sock_addr4(struct bpf_sock_addr *ctx)
{
	__u16 port = bpf_ntohs((__u16)ctx->user_port);
	__u32 addr = ctx->user_ip4;
	return verdict(matches_proto(ctx->protocol) && matches_port(port) && matches_addr4(addr));
}

static __always_inline int sock_addr6(struct bpf_sock_addr *ctx)
{
	__u32 addr[4] = {ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2], ctx->user_ip6[3]};
	__u16 port = bpf_ntohs((__u16)ctx->user_port);
	return verdict(matches_proto(ctx->protocol) && matches_port(port) && matches_addr6(addr));
}

SEC("cgroup/connect4")
int fl_connect4(struct bpf_sock_addr *ctx) { return sock_addr4(ctx); }

SEC("cgroup/connect6")
int fl_connect6(struct bpf_sock_addr *ctx) { return sock_addr6(ctx); }

/* UDP sendto/sendmsg with an address (an unconnected socket: most DNS stub resolvers). */
SEC("cgroup/sendmsg4")
int fl_sendmsg4(struct bpf_sock_addr *ctx) { return sock_addr4(ctx); }

SEC("cgroup/sendmsg6")
int fl_sendmsg6(struct bpf_sock_addr *ctx) { return sock_addr6(ctx); }

/* bind(): the port filter is the local port asked for. */
SEC("cgroup/bind4")
int fl_bind4(struct bpf_sock_addr *ctx) { return sock_addr4(ctx); }

SEC("cgroup/bind6")
int fl_bind6(struct bpf_sock_addr *ctx) { return sock_addr6(ctx); }

/* socket(AF_INET/AF_INET6, ...): fails socket creation. */
SEC("cgroup/sock_create")
int fl_sock_create(struct bpf_sock *sk)
{
	return verdict(matches_proto(sk->protocol));
}

/* Packet loss without netem: a dropped packet is gone, as on a lossy link. The peer's address and port
 * are read from the packet (the cgroup_skb context starts at the network header), with as few
 * helper calls as the filter needs: every packet of the cgroup passes here. */
struct l4_ports {
	__u16 source;
	__u16 dest;
};

/* The fixed IPv4 header (options, if any, follow it). */
struct ipv4_head {
	__u8 version_ihl;
	__u8 tos;
	__u16 tot_len;
	__u16 id;
	__u16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__u16 check;
	__u32 saddr;
	__u32 daddr;
};

struct ipv6_head {
	__u32 version_class_flow;
	__u16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	__u32 saddr[4];
	__u32 daddr[4];
};

static __always_inline int skb_matches(struct __sk_buff *skb, int egress)
{
	if (fl_port == 0 && fl_proto == 0 && !fl_has_addr)
		return 1;
	__u32 protocol;
	__u32 l4_offset;
	if (skb->protocol == bpf_htons(0x0800)) {
		struct ipv4_head ip;
		if (bpf_skb_load_bytes(skb, 0, &ip, sizeof(ip)))
			return 0;
		if (!matches_addr4(egress ? ip.daddr : ip.saddr))
			return 0;
		protocol = ip.protocol;
		l4_offset = (__u32)(ip.version_ihl & 0x0f) * 4;
	} else if (skb->protocol == bpf_htons(0x86DD)) {
		struct ipv6_head ip;
		if (bpf_skb_load_bytes(skb, 0, &ip, sizeof(ip)))
			return 0;
		if (!matches_addr6(egress ? ip.daddr : ip.saddr))
			return 0;
		protocol = ip.nexthdr;
		l4_offset = sizeof(ip);
	} else {
		return 0;
	}
	if (!matches_proto(protocol))
		return 0;
	if (fl_port == 0)
		return 1;
	if (protocol != IPPROTO_TCP && protocol != IPPROTO_UDP)
		return 0;
	struct l4_ports ports;
	if (bpf_skb_load_bytes(skb, l4_offset, &ports, sizeof(ports)))
		return 0;
	return matches_port(bpf_ntohs(egress ? ports.dest : ports.source));
}

SEC("cgroup_skb/ingress")
int fl_drop_ingress(struct __sk_buff *skb)
{
	if (skb_matches(skb, 0) && fl_roll())
		return 0;
	return 1;
}

/* 2 = drop with congestion notification: UDP senders see no error (the kernel turns NET_XMIT_DROP
 * into ENOBUFS, which UDP swallows unless IP_RECVERR), TCP retransmits; returning 0 would fail the
 * send with EPERM instead, which no lossy link does. */
SEC("cgroup_skb/egress")
int fl_drop_egress(struct __sk_buff *skb)
{
	if (skb_matches(skb, 1) && fl_roll())
		return 2;
	return 1;
}
