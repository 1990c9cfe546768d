/*
 * chimech: runs the ClickHouse engine inside libchdb.so as a local server.
 *
 * libchdb.so is ClickHouse's clickhouse-local built as a library. Its
 * command-line entry point runs queries like `clickhouse local`; the query
 * `SYSTEM START LISTEN HTTP` opens the HTTP server, and a long-running query
 * keeps the process (and so the server) alive. Ending that query (KILL QUERY
 * over HTTP) makes chdb_query_cmdline return and the host exit; SIGKILL also
 * works, since all data is on disk under --path.
 *
 * Only HTTP: clickhouse-local makes any exception that leaves a server
 * thread end the process (std::terminate), and the native protocol's handler
 * lets a failed login leave it, so one wrong password sent to a native port
 * would stop the engine. The HTTP handler answers such errors.
 *
 * Users: the engine reads config.xml from the working dir, which chime
 * writes (infra/clickhouse/users.go).
 *
 * usage: chimech LIBCHDB_SO DATA_DIR HTTP_PORT
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *(*query_cmdline_fn)(int, char **);
typedef const char *(*result_error_fn)(void *);

int main(int argc, char **argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: %s LIBCHDB_SO DATA_DIR HTTP_PORT\n", argv[0]);
		return 2;
	}
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		fprintf(stderr, "chimech: load %s: %s\n", argv[1], dlerror());
		return 1;
	}
	query_cmdline_fn query = (query_cmdline_fn)dlsym(lib, "chdb_query_cmdline");
	result_error_fn result_error = (result_error_fn)dlsym(lib, "chdb_result_error");
	if (query == NULL) {
		fprintf(stderr, "chimech: %s has no chdb_query_cmdline: %s\n", argv[1], dlerror());
		return 1;
	}

	char path[4096], http[64];
	snprintf(path, sizeof path, "--path=%s", argv[2]);
	snprintf(http, sizeof http, "--http_port=%s", argv[3]);
	char *args[] = {
		"clickhouse",
		"--multiquery",
		path,
		"--query=SYSTEM START LISTEN HTTP; "
		"SELECT sleepEachRow(1) FROM numbers(1000000000) "
		"SETTINGS max_block_size = 1, max_execution_time = 0 FORMAT Null",
		"--",
		http,
		"--listen_host=127.0.0.1",
		NULL,
	};
	int n = (int)(sizeof args / sizeof args[0]) - 1;

	fprintf(stderr, "chimech: serving %s on 127.0.0.1 http %s\n", argv[2], argv[3]);
	void *res = query(n, args);
	if (res == NULL) {
		fprintf(stderr, "chimech: query failed (no result)\n");
		return 1;
	}
	if (result_error != NULL) {
		const char *err = result_error(res);
		if (err != NULL && err[0] != '\0') {
			/* KILL QUERY ends the keep-alive query with an error: that is the normal stop. */
			if (strstr(err, "QUERY_WAS_CANCELLED") != NULL || strstr(err, "cancelled") != NULL) {
				fprintf(stderr, "chimech: stopped\n");
				return 0;
			}
			fprintf(stderr, "chimech: %s\n", err);
			return 1;
		}
	}
	fprintf(stderr, "chimech: stopped\n");
	return 0;
}
