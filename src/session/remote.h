/*
 * remote.h - a gsbd as a session (session.h): the session URLs tcp://... and
 * unix://..., with ?token_file=PATH (else $GSB_TOKEN, $GSB_TOKEN_FILE) and
 * max_inline=BYTES.  Implemented in remote.c over src/net/ (wire protocol,
 * sockets, the shared-memory arena).
 *
 * A remote session keeps a pool of connections joined to one server-side
 * session (docs/PROTOCOL.md), so calls from several threads run
 * concurrently; each call checks a connection out for its request.  A model
 * of a remote session is a gsb__model (est, session) whose impl_id names the
 * server's model, and a data handle's impl_id names the server's handle; a
 * model's fitted flag mirrors the server's after every reply.  Errors arrive
 * as the server's status and message unchanged; transport failures are
 * GSB_EIO naming the URL and what to check.
 */
#ifndef GSB_SESSION_REMOTE_H
#define GSB_SESSION_REMOTE_H

#include <stdint.h>

#include "session/session.h"

extern const gsb__session_vtab gsb__remote_session;

struct gsb__remote; /* opaque: connection pool, arena, URL */

/* The remote state of s, or NULL when s is not a remote session. */
struct gsb__remote *gsb__remote_of(const gsb_session *s);

/* What a remote session's transfers did, for tests and benchmarks: how many
 * input arrays went by each route. */
typedef struct gsb__remote_stats {
    uint64_t shm_zero_copy;      /* already in the arena: (segment, offset) only */
    uint64_t shm_one_copy;       /* copied into an arena scratch block */
    uint64_t shm_one_copy_bytes;
    uint64_t chunked;            /* streamed as CHUNK frames */
    uint64_t chunked_bytes;
    uint64_t max_inline;         /* the inline limit in use */
    int shm;                     /* the session shares memory with gsbd */
} gsb__remote_stats;
void gsb__remote_get_stats(const struct gsb__remote *r, gsb__remote_stats *out);
/* One "ping" round trip (benchmarks: the protocol's smallest request). */
int gsb__remote_ping(struct gsb__remote *r);

#endif
