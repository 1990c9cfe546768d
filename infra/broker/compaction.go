package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// kfake compacts a partition by deleting its segment files and writing the
// surviving batches into new ones (rebuildSegments). A process killed in
// between loses the partition's records: a kill -9 while a table of a
// million jobs was being compacted lost 8% of the scheduler's rows. So the
// broker makes each compaction recoverable:
//
//  1. before it, every segment and index file of the partition (the tables
//     are compacted a partition at a time) is hard-linked into
//     compactionDir (no copy: the links keep the old files' contents when
//     kfake removes their names), then the pendingMarker is written and
//     synced;
//  2. kfake compacts (produce requests wait meanwhile: both run in kfake's
//     one loop);
//  3. the marker is removed, then the links.
//
// A broker that starts and finds the marker puts the linked files back in
// place of whatever the interrupted compaction left: the partitions as
// they were before it, every record included. Found without the marker,
// the links are only removed. The one case not covered is a kill in the
// instant between kfake finishing and the marker going, with a produce
// appended in that instant (it would be dropped with the compacted files).
const (
	compactionDir = "compaction"
	pendingMarker = "PENDING"
)

// partitionDir is kfake's directory of a partition (kfake: partDir).
func partitionDir(dataDir, topic string, partition int32) string {
	return filepath.Join(dataDir, "partitions", url.PathEscape(topic)+"-"+strconv.Itoa(int(partition)))
}

// segmentFile reports whether name is a kfake segment or segment index.
func segmentFile(name string) bool {
	return strings.HasSuffix(name, ".dat") || strings.HasSuffix(name, ".idx")
}

// protect links the segment files of a table's partition into
// compactionDir and writes the marker.
func (b *Broker) protect(topic string, partition int32) error {
	root := filepath.Join(b.opts.DataDir, compactionDir)
	if err := os.RemoveAll(root); err != nil {
		return err
	}
	src := partitionDir(b.opts.DataDir, topic, partition)
	ents, err := os.ReadDir(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing written yet: nothing to lose
	}
	if err != nil {
		return err
	}
	dst := filepath.Join(root, filepath.Base(src))
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	for _, e := range ents {
		if !segmentFile(e.Name()) {
			continue
		}
		if err := os.Link(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return writeSynced(filepath.Join(root, pendingMarker))
}

// unprotect removes the marker, then the links.
func (b *Broker) unprotect() error {
	root := filepath.Join(b.opts.DataDir, compactionDir)
	if err := os.Remove(filepath.Join(root, pendingMarker)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := syncDir(root); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.RemoveAll(root)
}

// recoverCompaction puts back the files of a compaction that did not
// finish; it runs before kfake opens the directory. It reports how many
// partitions it restored.
func recoverCompaction(dataDir string) (int, error) {
	root := filepath.Join(dataDir, compactionDir)
	if _, err := os.Stat(filepath.Join(root, pendingMarker)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, os.RemoveAll(root) // finished, or never started
		}
		return 0, err
	}
	parts, err := os.ReadDir(root)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pd := range parts {
		if !pd.IsDir() {
			continue
		}
		live := filepath.Join(dataDir, "partitions", pd.Name())
		if err := os.MkdirAll(live, 0o700); err != nil {
			return n, err
		}
		// What the compaction left, and the snapshot written at the last
		// clean stop (kfake replays the segments without it).
		ents, err := os.ReadDir(live)
		if err != nil {
			return n, err
		}
		for _, e := range ents {
			if segmentFile(e.Name()) || e.Name() == "snapshot.json" {
				if err := os.Remove(filepath.Join(live, e.Name())); err != nil {
					return n, err
				}
			}
		}
		saved, err := os.ReadDir(filepath.Join(root, pd.Name()))
		if err != nil {
			return n, err
		}
		for _, e := range saved {
			if err := os.Rename(filepath.Join(root, pd.Name(), e.Name()), filepath.Join(live, e.Name())); err != nil {
				return n, err
			}
		}
		if err := syncDir(live); err != nil {
			return n, err
		}
		n++
	}
	return n, os.RemoveAll(root)
}

func writeSynced(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
