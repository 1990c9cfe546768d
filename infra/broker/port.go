package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PortFileName, in the data directory, holds the port the broker last
// listened on. A broker started without a fixed port listens there again
// while it is free, so whoever was given its address (other chime
// processes sharing `chime dev`'s broker, a service publishing with the Go
// SDK) still reaches it after a restart.
const PortFileName = "chime-broker.port"

// rememberedPort reads the port an earlier broker on dir listened on; 0
// when there is none.
func rememberedPort(dir string) (int, error) {
	raw, err := os.ReadFile(filepath.Join(dir, PortFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	port, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || port < 1 || port > 65535 {
		return 0, fmt.Errorf("%s holds %q, not a port", filepath.Join(dir, PortFileName), raw)
	}
	return port, nil
}

// rememberPort keeps port for the next start. It writes a file beside and
// renames it, so a kill in the middle leaves the old port or the new one.
func rememberPort(dir string, port int) error {
	path := filepath.Join(dir, PortFileName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(port)+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
