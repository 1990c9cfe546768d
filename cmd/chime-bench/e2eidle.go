package main

// The idle phase: chime dev's CPU and memory with nothing due, and what
// connections announcing large bodies cost it.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// benchIdle measures chime dev's CPU with nothing due.
func benchIdle(ctx context.Context, o e2eOptions) []result {
	fmt.Fprintf(os.Stderr, "e2e idle: starting chime dev, then %s with nothing due...\n", o.idle)
	c := startChime(ctx, o.chime)
	defer c.stop(o.keepLogs)
	c.createNamespace(ctx)
	time.Sleep(10 * time.Second)
	cpu0, ch0 := c.cpu(), c.clickhouseCPU()
	time.Sleep(o.idle)
	cpu := c.cpu() - cpu0
	ch := c.clickhouseCPU() - ch0
	rss, _ := procMem(c.pid())
	share := cpu / o.idle.Seconds()
	return append([]result{
		{fmt.Sprintf("idle chime dev: share of a core (%.2f s CPU in %s; ClickHouse %.2f s)", cpu, o.idle, ch), fmt.Sprintf("%.2f%%", share*100), "< 0.5%", verdict(share < 0.005)},
		{"idle chime dev: RSS, chime / ClickHouse", mb(rss) + " / " + mb(c.clickhouseRSS()), "—", "—"},
	}, announcedBodies(ctx, c)...)
}

// announcedBodies opens hostileConns connections to chime dev's API that
// each announce a 4 MiB body and send one byte of it, as a client trying to
// exhaust memory before authentication would, and reports what they cost
// chime (RSS growth) and whether the API still answers meanwhile.
func announcedBodies(ctx context.Context, c *chimeProc) []result {
	const hostileConns = 1000
	fmt.Fprintf(os.Stderr, "e2e idle: %d connections announcing 4 MiB bodies...\n", hostileConns)
	before, _ := procMem(c.pid())
	var conns []net.Conn
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	for range hostileConns {
		conn, err := net.Dial("tcp", c.apiAddr)
		if err != nil {
			fail("announced bodies: dial %s: %v", c.apiAddr, err)
		}
		conns = append(conns, conn)
		_, err = fmt.Fprintf(conn, "POST /v1/namespaces/bench/jobs HTTP/1.1\r\nHost: chime\r\nAuthorization: Bearer nobody\r\n"+
			"Content-Type: application/json\r\nContent-Length: 4194304\r\n\r\n{")
		if err != nil {
			fail("announced bodies: write: %v", err)
		}
	}
	// The writes return once the kernel holds the bytes: give chime a few
	// seconds to accept every connection and read its headers, then measure.
	time.Sleep(5 * time.Second)
	st, _ := c.call(ctx, "GET", "/readyz", nil)
	after, _ := procMem(c.pid())
	grown := after - before
	return []result{
		{fmt.Sprintf("idle chime dev: RSS growth with %d connections announcing 4 MiB bodies (%s → %s)", hostileConns, mb(before), mb(after)),
			mb(grown), "< 100 MB", verdict(grown < 100<<20)},
		{fmt.Sprintf("same: the API answers meanwhile (GET /readyz → %d)", st), verdict(st == http.StatusOK), "yes", verdict(st == http.StatusOK)},
	}
}
