package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/chime-sched/chime/infra/credential"
)

// Job reads (views/jobquery): every scheduler serves the rows of the
// partitions it owns on CHIME_QUERY_ADDR and advertises where in its group
// membership; API processes sign their reads with the query secret.

// querySecret is CHIME_QUERY_SECRET, or the secret in
// <state dir>/query-credential, created by whichever process of the state
// dir needs it first.
func (e *env) querySecret() (string, error) {
	if e.cfg.QuerySecret != "" {
		return e.cfg.QuerySecret, nil
	}
	c, err := credential.LoadOrCreate(e.cfg.QueryCredentialPath(), "chime")
	if err != nil {
		return "", fmt.Errorf("query secret (set CHIME_QUERY_SECRET, or fix %s): %w", e.cfg.QueryCredentialPath(), err)
	}
	return c.Password, nil
}

// listenQuery opens the scheduler's query server socket on
// CHIME_QUERY_ADDR (port 0: the port of the last start while it is free,
// else a free one, remembered for the next start) and returns the address
// to advertise.
func listenQuery(e *env) (net.Listener, string, error) {
	host, port, err := net.SplitHostPort(e.cfg.QueryAddr)
	if err != nil {
		return nil, "", fmt.Errorf("query server: %q is not host:port", e.cfg.QueryAddr)
	}
	var ln net.Listener
	remembered := port == "0"
	if remembered {
		if prev := readQueryPort(e); prev != "" {
			if ln, err = net.Listen("tcp", net.JoinHostPort(host, prev)); err != nil {
				e.log.Warn("query server: the port of the last start is taken; listening on a free one (the scheduler rejoins its group with a new address)", "port", prev, "err", err)
			}
		}
	}
	if ln == nil {
		if ln, err = net.Listen("tcp", e.cfg.QueryAddr); err != nil {
			return nil, "", fmt.Errorf("query server: listen on %s (--query-addr, CHIME_QUERY_ADDR): %w", e.cfg.QueryAddr, err)
		}
	}
	if remembered {
		if err := writeQueryPort(e, ln.Addr().(*net.TCPAddr).Port); err != nil {
			e.log.Warn("query server: the next start may listen on another port: remembering this one", "err", err)
		}
	}
	adv, err := advertisedQueryAddr(e.cfg.QueryAdvertisedAddr, ln.Addr().(*net.TCPAddr))
	if err != nil {
		ln.Close()
		return nil, "", err
	}
	return ln, adv, nil
}

// advertisedQueryAddr is the configured host[:port] with the bound port
// where it has none (or 0); unset, the bound address, with the host name
// for a socket on every interface.
func advertisedQueryAddr(configured string, bound *net.TCPAddr) (string, error) {
	port := strconv.Itoa(bound.Port)
	if configured != "" {
		host, p, err := net.SplitHostPort(configured)
		if err != nil {
			host, p = configured, "0"
		}
		if p != "0" {
			port = p
		}
		return net.JoinHostPort(host, port), nil
	}
	if !bound.IP.IsUnspecified() {
		return bound.String(), nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("query server: it listens on every interface and the host name is unknown (%v); set --query-advertised-addr (CHIME_QUERY_ADVERTISED_ADDR)", err)
	}
	return net.JoinHostPort(host, port), nil
}

func readQueryPort(e *env) string {
	raw, err := os.ReadFile(e.cfg.QueryPortPath())
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			e.log.Warn("query server: cannot read the port of the last start", "err", err)
		}
		return ""
	}
	p := strings.TrimSpace(string(raw))
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		e.log.Warn("query server: ignoring a port file that holds no port", "path", e.cfg.QueryPortPath())
		return ""
	}
	return p
}

// writeQueryPort keeps the port for the next start.
func writeQueryPort(e *env, port int) error {
	return replaceFile(e.cfg.QueryPortPath(), fmt.Sprintln(port))
}

// replaceFile writes content to a file beside path and renames it over
// path, so a kill in the middle leaves the old content or the new.
func replaceFile(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
