/*
 * wire.h - the gsb protocol's frames and arrays (docs/PROTOCOL.md), shared by
 * the client (src/session/remote.c) and the server (src/server/).
 *
 * Three layers, each usable alone:
 *   - the 32-byte header codec and the frame parser: pure functions over
 *     bytes, the fuzz targets (tests/fuzz/);
 *   - array descriptors: JSON <-> gsb__wire_array, with every size checked;
 *   - blocking frame I/O on a connected socket (sendmsg/recvmsg, so a memfd
 *     can ride along on a Unix socket), including chunked arrays.
 * Every function returns a gsb_status and sets the thread's message
 * (gsb__err) on failure; I/O failures are GSB_EIO.
 */
#ifndef GSB_NET_WIRE_H
#define GSB_NET_WIRE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "net/compat.h" /* struct iovec, sockets on POSIX and Windows */

#include "gsb.h"

#define GSB__WIRE_MAGIC 0x31425347u /* "GSB1" */
#define GSB__WIRE_VERSION 1
#define GSB__WIRE_HDR_SIZE 32
#define GSB__WIRE_MAX_HEAD (4u << 20)
#define GSB__WIRE_MAX_INLINE ((uint64_t)64 << 20)  /* inline section of one frame */
#define GSB__WIRE_MAX_CHUNK ((uint64_t)64 << 20)   /* payload of one CHUNK */
#define GSB__WIRE_CHUNK_SEND ((size_t)8 << 20)     /* what senders use */
/* What senders place inline at most: larger arrays go as chunks, which the
 * receiver reads straight into their final buffer (an inline array is read
 * into the frame's buffer and copied once more). */
#define GSB__WIRE_INLINE_PREFERRED ((uint64_t)1 << 20)
#define GSB__WIRE_ALIGN 64                         /* inline and shm offsets */
#define GSB__WIRE_U8 100                           /* wire-only dtype: uint8 (blobs) */

enum gsb__frame_type {
    GSB__F_HELLO = 1,
    GSB__F_WELCOME = 2,
    GSB__F_REQUEST = 3,
    GSB__F_REPLY = 4,
    GSB__F_ERROR = 5,
    GSB__F_PROGRESS = 6,
    GSB__F_CANCEL = 7,
    GSB__F_CHUNK = 8
};

typedef struct gsb__frame_hdr {
    uint16_t version;
    uint16_t type;
    uint64_t req_id;
    uint64_t length;   /* head_len + inline bytes */
    uint32_t head_len;
    uint32_t flags;
} gsb__frame_hdr;

/* ---- header codec and frame parser (no I/O) ------------------------------ */

void gsb__hdr_encode(const gsb__frame_hdr *h, uint8_t out[GSB__WIRE_HDR_SIZE]);
/* Checks magic, version, type, flags, head_len <= length, head_len and the
 * inline section within their limits (CHUNK: length <= GSB__WIRE_MAX_CHUNK,
 * head_len 0). */
int gsb__hdr_decode(const uint8_t in[GSB__WIRE_HDR_SIZE], gsb__frame_hdr *out);

/* A received frame: the head parsed, the inline section owned. */
typedef struct gsb__frame {
    gsb__frame_hdr hdr;
    json_t *head;        /* a JSON object, or NULL when head_len is 0 */
    uint8_t *body;       /* the inline section (64-byte aligned), or NULL */
    size_t body_len;
    int fd;              /* a file descriptor that came with it, else -1 */
    int refused;         /* gsb__wire_recv_budgeted: the budget refused its inline section */
} gsb__frame;

/* Parse payload (hdr->length bytes after a decoded header) into out; the
 * inline section is copied into an aligned buffer.  The fuzz entry point. */
int gsb__frame_parse(const gsb__frame_hdr *hdr, const uint8_t *payload, gsb__frame *out);
/* Release head, body and fd (closes it); leaves an empty frame (fd -1). */
void gsb__frame_clear(gsb__frame *f);

/* ---- array descriptors ---------------------------------------------------- */

typedef enum gsb__at {
    GSB__AT_NONE = 0,   /* JSON null: input not given */
    GSB__AT_INLINE,
    GSB__AT_CHUNKS,
    GSB__AT_SHM,
    GSB__AT_DATA
} gsb__at;

typedef struct gsb__wire_array {
    gsb__at at;
    int dtype;           /* a gsb_dtype, or GSB__WIRE_U8 */
    int ndim;            /* 0, 1 or 2 */
    int64_t shape[2];
    int fortran;         /* bytes in Fortran (column-major) order */
    uint64_t offset;     /* AT_INLINE, AT_SHM */
    uint64_t segment;    /* AT_SHM */
    uint64_t handle;     /* AT_DATA */
    uint64_t nbytes;     /* prod(shape) * itemsize, computed by parse */
} gsb__wire_array;

size_t gsb__wire_itemsize(int dtype); /* 0 for an unknown dtype */
/* JSON (object or null) -> descriptor; validates dtype, ndim, shape >= 0,
 * no overflow (nbytes < 2^62), offsets aligned, required keys present. */
int gsb__wire_array_parse(const json_t *desc, gsb__wire_array *out);
/* descriptor -> new JSON object (json_null() for AT_NONE); NULL on OOM. */
json_t *gsb__wire_array_json(const gsb__wire_array *a);
/* Pointer to an AT_INLINE array's bytes in f's inline section, bounds-checked. */
int gsb__wire_inline_ptr(const gsb__frame *f, const gsb__wire_array *a, const void **out);
/* The gsb_array view of nbytes at data described by a (dtype must be a gsb_dtype;
 * Fortran order becomes strides). */
gsb_array gsb__wire_as_array(const gsb__wire_array *a, void *data);

/* ---- building a message with arrays --------------------------------------- */
/*
 * Collects arrays for one outgoing frame: each gsb_array (any strides) is
 * described, contiguous ones are referenced in place and others packed into
 * an owned buffer.  Arrays go inline while the inline section stays within
 * max_inline, the rest as chunks.  A caller may instead add an array already
 * placed elsewhere (shm, data) with gsb__outmsg_add_placed.
 */
typedef struct gsb__outmsg {
    json_t *arrays;          /* JSON list of descriptors, in order */
    struct iovec *parts;     /* inline parts (with padding) then chunk parts */
    int n_inline, n_chunk, cap;
    uint64_t inline_len, chunk_len, max_inline;
    void **owned;            /* packed copies to free */
    int n_owned;
} gsb__outmsg;

void gsb__outmsg_init(gsb__outmsg *m, uint64_t max_inline);
/* a == NULL or a->data == NULL (and ndim 0): appends null ("not given"). */
int gsb__outmsg_add(gsb__outmsg *m, const gsb_array *a);
/* bytes as a 1-D uint8 array (model blobs) */
int gsb__outmsg_add_bytes(gsb__outmsg *m, const void *bytes, size_t len);
int gsb__outmsg_add_placed(gsb__outmsg *m, const gsb__wire_array *a);
void gsb__outmsg_clear(gsb__outmsg *m);

/* ---- blocking frame I/O ---------------------------------------------------- */

/*
 * Send one frame: header, head (may be NULL), the outmsg's inline parts (msg
 * may be NULL), then its chunked arrays as CHUNK frames; pass_fd >= 0 sends
 * that descriptor as SCM_RIGHTS with the header (Unix sockets).  When msg is
 * given, its "arrays" list is stored in head under key arrays_key ("arrays"
 * or "inputs") before sending.  Writes use MSG_NOSIGNAL (no SIGPIPE).
 */
int gsb__wire_send(int sock, uint16_t type, uint64_t req_id, json_t *head,
                   const char *arrays_key, const gsb__outmsg *msg, int pass_fd);
/* A frame with no head and no payload (CANCEL). */
int gsb__wire_send_empty(int sock, uint16_t type, uint64_t req_id);

/*
 * Receive one frame (header, head, inline section; a passed fd is kept in
 * out->fd).  Frames whose inline section exceeds max_inline are refused
 * (GSB_EINVAL).  timeout_ms < 0 waits forever; on timeout before the first
 * byte of a frame returns GSB_ECANCELLED with no bytes consumed, so a caller
 * can poll (check a cancel flag) and call again.  A closed peer is GSB_EIO
 * with "connection closed".
 */
int gsb__wire_recv(int sock, gsb__frame *out, uint64_t max_inline, int timeout_ms);

/*
 * A receiver's say over the memory a frame takes (gsbd's budget): take(ctx,
 * bytes) is asked for the frame's length (head and inline section) once its
 * header passed the checks, before anything is allocated.  GSB_OK: received
 * as usual.  GSB_ENOMEM: the inline section is read and dropped, the head
 * still read and parsed (it says what follows the frame), and the frame
 * comes back with body NULL and refused = GSB_ENOMEM, the stream at its end.
 * Any other status: returned at once (the frame's bytes left unread).
 * Heads and inline sections of map_from bytes or more are mapped
 * (gsb__host_alloc_mapped), never taken from malloc (0: as usual).
 */
typedef struct gsb__wire_budget {
    int (*take)(void *ctx, uint64_t bytes);
    void *ctx;
    size_t map_from;
} gsb__wire_budget;
int gsb__wire_recv_budgeted(int sock, gsb__frame *out, uint64_t max_inline, int timeout_ms,
                            const gsb__wire_budget *budget);

/*
 * Receive the CHUNK frames of request req_id into the buffers dst[0..n-1]
 * (sizes in dst[i].iov_len), filled back to back in order.  Any other frame,
 * a wrong req_id or more bytes than expected is GSB_EINVAL.
 */
int gsb__wire_recv_chunks(int sock, uint64_t req_id, const struct iovec *dst, int n);

/*
 * The same bytes read piecewise, in pieces of any size (a CHUNK frame may
 * straddle two pieces): for receivers that stream a large array through a
 * small buffer (gsbd's data.put over TCP, into pinned staging memory).
 * total is the byte count of all the chunked arrays of the request.
 */
typedef struct gsb__chunk_reader {
    int sock;
    uint64_t req_id;
    uint64_t left_total; /* bytes not yet read */
    uint64_t left_frame; /* payload bytes of the current CHUNK not yet read */
} gsb__chunk_reader;
void gsb__chunk_reader_init(gsb__chunk_reader *r, int sock, uint64_t req_id, uint64_t total);
/* Exactly len bytes (len <= what is left) into dst. */
int gsb__chunk_read(gsb__chunk_reader *r, void *dst, size_t len);

/* ---- sockets ------------------------------------------------------------- */

/* "tcp://host:port" or "unix:///path" (also "unix:relative/path"). */
typedef struct gsb__sockaddr_url {
    int is_unix;
    char host[256];
    int port;
    char path[108];
} gsb__sockaddr_url;
int gsb__url_parse(const char *url, gsb__sockaddr_url *out);
/* Connect (TCP_NODELAY, large buffers where the kernel grants them whole);
 * clear error naming the URL on failure. */
int gsb__sock_connect(const char *url, int *out_fd);
/* Listen (SO_REUSEADDR; a stale Unix socket file is replaced only when nobody
 * answers on it); *bound_url is the actual address (port 0 resolved). */
int gsb__sock_listen(const char *url, int *out_fd, char **bound_url);
/* 1 when the TCP address is loopback (127.0.0.0/8, ::1, localhost) or Unix. */
int gsb__url_is_local(const gsb__sockaddr_url *u);

#endif
