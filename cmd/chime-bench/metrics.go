package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// scrape is one read of chime's /metrics.
type scrape map[string][]metricLine

type metricLine struct {
	labels string
	value  float64
}

func (c *chimeProc) scrape(ctx context.Context) scrape {
	st, body := c.call(ctx, "GET", "/metrics", nil)
	out := scrape{}
	if st != http.StatusOK {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name, labels := line[:i], ""
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name, labels = name[:j], name[j:]
		}
		out[name] = append(out[name], metricLine{labels, v})
	}
	return out
}

// sum adds every series of name.
func (s scrape) sum(name string) float64 {
	t := 0.0
	for _, l := range s[name] {
		t += l.value
	}
	return t
}

// quantileSince is the q quantile of histogram name over what it counted
// since prev (bucket upper bounds; -1 when nothing was counted).
func (s scrape) quantileSince(prev scrape, name string, q float64) float64 {
	counts := func(sc scrape) map[string]float64 {
		m := map[string]float64{}
		for _, l := range sc[name+"_bucket"] {
			m[l.labels] += l.value
		}
		return m
	}
	now, before := counts(s), counts(prev)
	type bucket struct{ le, n float64 }
	var bs []bucket
	for labels, n := range now {
		_, le, ok := strings.Cut(labels, `le="`)
		if !ok {
			continue
		}
		le, _, _ = strings.Cut(le, `"`)
		l, err := strconv.ParseFloat(le, 64)
		if err != nil {
			continue
		}
		bs = append(bs, bucket{l, n - before[labels]})
	}
	if len(bs) == 0 {
		return -1
	}
	// By bound: the +Inf bucket holds the total.
	slices.SortFunc(bs, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
	total := bs[len(bs)-1].n
	if total <= 0 {
		return -1
	}
	for _, b := range bs {
		if b.n >= q*total {
			return b.le
		}
	}
	return -1
}

// class reads one class of a labelled counter.
func (s scrape) class(name, class string) float64 {
	for _, l := range s[name] {
		if strings.Contains(l.labels, `class="`+class+`"`) {
			return l.value
		}
	}
	return 0
}
