package clickhouse

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"text/template"
)

// Who may log in. The engine is clickhouse-local: it reads the users from
// the file config.xml names (users_config) when config.xml is in its
// working dir, and it runs its own queries (start the listeners, then keep
// the process alive) in a session it opens as `default`, without a
// password, from 127.0.0.1, before the listeners exist. No option changes
// that user, and no network rule tells that session from a client on
// 127.0.0.1. So `default` must exist without a password, and:
//
//   - its profile allows one session at a time (max_sessions_for_user), and
//     the engine's own session holds it for the server's whole life: any
//     client logging in as `default`, with or without a password, is refused
//     (USER_SESSION_LIMIT_EXCEEDED);
//   - it may only start the listeners (SYSTEM LISTEN), should that ever
//     change.
//
// Clients log in as the one other user, with its password (stored as its
// SHA-256 here). Both files are written at every start, so the credential
// Start is given is the one that works.
//
// A request with no credential at all is taken by the engine as one from
// `default`, which then fails on the session limit with HTTP 500, naming the
// user's internal id. So config.xml routes the HTTP requests itself
// (http_handlers): one that names `default` is answered 403, one that
// carries no credential in its headers (HTTP Basic, or X-ClickHouse-User
// and X-ClickHouse-Key, as clickhouse-go sends them) 401, and /ping is
// answered without one; only requests with a credential reach the query
// handler, which checks it. Credentials in the URL (?user=...) are refused
// with the 401: they end up in logs.
var usersXML = template.Must(template.New("users.xml").Parse(`<clickhouse>
  <!-- Written by chime at every start (infra/clickhouse/users.go); edits are lost. -->
  <profiles>
    <default/>
    <engine>
      <max_sessions_for_user>1</max_sessions_for_user>
    </engine>
  </profiles>
  <quotas>
    <default/>
  </quotas>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip></networks>
      <profile>engine</profile>
      <quota>default</quota>
      <grants><query>GRANT SYSTEM LISTEN ON *.*</query></grants>
    </default>
    <{{.User}}>
      <password_sha256_hex>{{.Hash}}</password_sha256_hex>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </{{.User}}>
  </users>
</clickhouse>
`))

const configXML = `<clickhouse>
  <!-- Written by chime at every start (infra/clickhouse/users.go); edits are lost. -->
  <users_config>users.xml</users_config>
  <http_handlers>
    <rule>
      <headers><X-ClickHouse-User>regex:^default$</X-ClickHouse-User></headers>
      <handler>` + refuseDefault + `</handler>
    </rule>
    <rule>
      <!-- Basic credentials of "default:...": base64 of "default:" and of any byte after it starts so. -->
      <headers><Authorization>regex:^Basic ZGVmYXVsdD[o-r].*$</Authorization></headers>
      <handler>` + refuseDefault + `</handler>
    </rule>
    <rule>
      <headers><Authorization>regex:.+</Authorization></headers>
      <handler><type>dynamic_query_handler</type><query_param_name>query</query_param_name></handler>
    </rule>
    <rule>
      <headers><X-ClickHouse-User>regex:.+</X-ClickHouse-User></headers>
      <handler><type>dynamic_query_handler</type><query_param_name>query</query_param_name></handler>
    </rule>
    <rule>
      <url>/ping</url>
      <methods>GET,HEAD</methods>
      <handler><type>static</type><response_content>Ok.
</response_content></handler>
    </rule>
    <rule>
      <handler><type>static</type><status>401</status><content_type>text/plain; charset=UTF-8</content_type>
        <response_content>` + NoCredentialAnswer + `
</response_content></handler>
    </rule>
  </http_handlers>
</clickhouse>
`

// NoCredentialAnswer is the body of the 401 the local server answers a
// request that carries no credential.
const NoCredentialAnswer = "chime's local ClickHouse: authentication required: send the user and password of the credential file " +
	"(clickhouse-credential in chime's state dir) with HTTP Basic auth, or as X-ClickHouse-User and X-ClickHouse-Key; credentials in the URL are not accepted"

// DefaultUserAnswer is the body of the 403 it answers a request as the
// engine's own user.
const DefaultUserAnswer = "chime's local ClickHouse: the user default is the engine's own and cannot log in; " +
	"log in as the user of the credential file (clickhouse-credential in chime's state dir)"

const refuseDefault = `<type>static</type><status>403</status><content_type>text/plain; charset=UTF-8</content_type>
        <response_content>` + DefaultUserAnswer + `
</response_content>`

// writeUsers writes config.xml and users.xml into dir, the engine's
// working dir, readable by their owner only.
func writeUsers(dir, user, password string) error {
	hash := sha256.Sum256([]byte(password))
	var users bytes.Buffer
	if err := usersXML.Execute(&users, struct{ User, Hash string }{user, hex.EncodeToString(hash[:])}); err != nil {
		return err
	}
	for name, content := range map[string][]byte{"users.xml": users.Bytes(), "config.xml": []byte(configXML)} {
		if err := writePrivate(filepath.Join(dir, name), content); err != nil {
			return fmt.Errorf("clickhouse: %w", err)
		}
	}
	return nil
}

// writePrivate replaces path with content, mode 0600 (os.WriteFile keeps
// the mode of a file that exists).
func writePrivate(path string, content []byte) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.WriteFile(path, content, 0o600)
}

// checkUser keeps the user name to what users.xml can hold as an element
// name, and off the engine's own user.
func checkUser(user string) error {
	if user == "default" {
		return fmt.Errorf("clickhouse: Options.User %q is the engine's own user; choose another name", user)
	}
	for i, r := range user {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_' || i > 0 && r >= '0' && r <= '9') {
			return fmt.Errorf("clickhouse: Options.User %q: use letters, digits and '_', starting with a letter or '_'", user)
		}
	}
	return nil
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(bytes.TrimSpace(w.buf))
}
