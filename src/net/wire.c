/*
 * wire.c - frames and arrays of the gsb protocol (docs/PROTOCOL.md).
 *
 * Everything that reads bytes from the wire treats them as hostile: every
 * length is checked against its limit before it is used, every size sum or
 * product is overflow-checked, and a failure leaves no allocation and no
 * received file descriptor behind.  Sending builds one sendmsg per frame
 * (header, head and inline arrays together) so a small request is one
 * system call, and large arrays travel as CHUNK frames whose payload is read
 * straight into the caller's buffers.
 */
#include "core/hostmem.h"
#include "net/wire.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifndef _WIN32
#include <poll.h>
#include <sys/socket.h>
#endif

#include "core/error.h"

/* the largest byte size a descriptor may describe (PROTOCOL.md: below 2^62) */
#define WIRE_MAX_NBYTES ((uint64_t)1 << 62)
/* received fds we make room for per recvmsg: the protocol allows one per
 * frame, the room for more lets us see (and close) a peer's extras */
#define WIRE_MAX_FDS 8

static const uint8_t wire_zeros[GSB__WIRE_ALIGN]; /* padding between inline arrays */
/* where an empty array points when its frame has no inline section */
static _Alignas(GSB__WIRE_ALIGN) const uint8_t wire_empty[GSB__WIRE_ALIGN];

/* ---- little-endian integers ---------------------------------------------- */

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t align_up(uint64_t n)
{
    return (n + (GSB__WIRE_ALIGN - 1)) & ~(uint64_t)(GSB__WIRE_ALIGN - 1);
}

/* ---- header --------------------------------------------------------------- */

static const char *type_name(unsigned type)
{
    static const char *names[] = {"?",     "HELLO",    "WELCOME", "REQUEST", "REPLY",
                                  "ERROR", "PROGRESS", "CANCEL",  "CHUNK"};
    return type < sizeof names / sizeof names[0] ? names[type] : "?";
}

/* The limits of PROTOCOL.md on a decoded header (shared by decode, parse and
 * send, so we never emit a frame a receiver would refuse). */
static int check_hdr(const gsb__frame_hdr *h)
{
    if (h->version != GSB__WIRE_VERSION)
        return gsb__err(GSB_EINVAL, "bad frame: protocol version %u (this side speaks %d)",
                        (unsigned)h->version, GSB__WIRE_VERSION);
    if (h->type < GSB__F_HELLO || h->type > GSB__F_CHUNK)
        return gsb__err(GSB_EINVAL, "bad frame: unknown frame type %u", (unsigned)h->type);
    if (h->flags != 0)
        return gsb__err(GSB_EINVAL, "bad frame: unknown flags 0x%x", (unsigned)h->flags);
    if (h->head_len > h->length)
        return gsb__err(GSB_EINVAL, "bad frame: head_len %u exceeds the frame length %llu",
                        (unsigned)h->head_len, (unsigned long long)h->length);
    if (h->head_len > GSB__WIRE_MAX_HEAD)
        return gsb__err(GSB_EINVAL, "bad frame: head of %u bytes exceeds the limit of %u",
                        (unsigned)h->head_len, (unsigned)GSB__WIRE_MAX_HEAD);
    uint64_t body = h->length - h->head_len;
    if (h->type == GSB__F_CHUNK) {
        if (h->head_len != 0)
            return gsb__err(GSB_EINVAL, "bad frame: a CHUNK frame has no head (head_len %u)",
                            (unsigned)h->head_len);
        if (body > GSB__WIRE_MAX_CHUNK)
            return gsb__err(GSB_EINVAL, "bad frame: CHUNK of %llu bytes exceeds the limit of "
                            "%llu", (unsigned long long)body,
                            (unsigned long long)GSB__WIRE_MAX_CHUNK);
    } else if (body > GSB__WIRE_MAX_INLINE) {
        return gsb__err(GSB_EINVAL, "bad frame: inline section of %llu bytes exceeds the limit "
                        "of %llu (larger arrays travel as chunks)", (unsigned long long)body,
                        (unsigned long long)GSB__WIRE_MAX_INLINE);
    }
    if (h->type == GSB__F_CANCEL && h->length != 0)
        return gsb__err(GSB_EINVAL, "bad frame: a CANCEL frame carries no bytes (length %llu)",
                        (unsigned long long)h->length);
    return GSB_OK;
}

void gsb__hdr_encode(const gsb__frame_hdr *h, uint8_t out[GSB__WIRE_HDR_SIZE])
{
    put_u32(out, GSB__WIRE_MAGIC);
    put_u16(out + 4, h->version);
    put_u16(out + 6, h->type);
    put_u64(out + 8, h->req_id);
    put_u64(out + 16, h->length);
    put_u32(out + 24, h->head_len);
    put_u32(out + 28, h->flags);
}

int gsb__hdr_decode(const uint8_t in[GSB__WIRE_HDR_SIZE], gsb__frame_hdr *out)
{
    memset(out, 0, sizeof *out);
    uint32_t magic = get_u32(in);
    if (magic != GSB__WIRE_MAGIC)
        return gsb__err(GSB_EINVAL, "bad frame: magic 0x%08x is not \"GSB1\" (is the peer a "
                        "gsb client or server?)", (unsigned)magic);
    gsb__frame_hdr h;
    h.version = get_u16(in + 4);
    h.type = get_u16(in + 6);
    h.req_id = get_u64(in + 8);
    h.length = get_u64(in + 16);
    h.head_len = get_u32(in + 24);
    h.flags = get_u32(in + 28);
    GSB_TRY(check_hdr(&h));
    *out = h;
    return GSB_OK;
}

/* ---- frames --------------------------------------------------------------- */

static void frame_init(gsb__frame *f)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

void gsb__frame_clear(gsb__frame *f)
{
    if (!f)
        return;
    json_decref(f->head);
    gsb__host_free(f->body);
    if (f->fd >= 0)
        close(f->fd);
    frame_init(f);
}

/* The head: a JSON object, parsed by jansson (duplicate keys are refused so a
 * head cannot say two things; depth is bounded by jansson itself). */
static int parse_head(const uint8_t *buf, size_t len, json_t **out)
{
    *out = NULL;
    json_error_t jerr;
    json_t *j = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!j)
        return gsb__err(GSB_EINVAL, "bad frame: the head is not valid JSON: %s (at byte %d)",
                        jerr.text, jerr.position);
    if (!json_is_object(j)) {
        json_decref(j);
        return gsb__err(GSB_EINVAL, "bad frame: the head is not a JSON object");
    }
    *out = j;
    return GSB_OK;
}

/* A 64-byte aligned buffer for an inline section (len > 0, at most 64 MiB by
 * the header limits, so the rounding cannot overflow). */
static uint8_t *body_alloc(uint64_t len, size_t map_from)
{
    if (map_from && len >= map_from)
        return gsb__host_alloc_mapped((size_t)align_up(len));
    return gsb__host_alloc((size_t)align_up(len)); /* 64-byte aligned; huge pages when large */
}

int gsb__frame_parse(const gsb__frame_hdr *hdr, const uint8_t *payload, gsb__frame *out)
{
    frame_init(out);
    GSB_TRY(check_hdr(hdr));
    if (hdr->length > 0 && !payload)
        return gsb__err(GSB_EINVAL, "bad frame: %llu payload bytes announced but none given",
                        (unsigned long long)hdr->length);
    json_t *head = NULL;
    if (hdr->head_len > 0)
        GSB_TRY(parse_head(payload, hdr->head_len, &head));
    uint64_t body_len = hdr->length - hdr->head_len;
    uint8_t *body = NULL;
    if (body_len > 0) {
        body = body_alloc(body_len, 0);
        if (!body) {
            json_decref(head);
            return gsb__err(GSB_ENOMEM, "out of memory for a frame of %llu bytes",
                            (unsigned long long)body_len);
        }
        memcpy(body, payload + hdr->head_len, (size_t)body_len);
    }
    out->hdr = *hdr;
    out->head = head;
    out->body = body;
    out->body_len = (size_t)body_len;
    return GSB_OK;
}

/* ---- array descriptors ------------------------------------------------------ */

size_t gsb__wire_itemsize(int dtype)
{
    switch (dtype) {
    case GSB_F32: return 4;
    case GSB_F64: return 8;
    case GSB_I32: return 4;
    case GSB_I64: return 8;
    case GSB__WIRE_U8: return 1;
    }
    return 0;
}

static const char *dtype_wire_name(int dtype)
{
    switch (dtype) {
    case GSB_F32: return "float32";
    case GSB_F64: return "float64";
    case GSB_I32: return "int32";
    case GSB_I64: return "int64";
    case GSB__WIRE_U8: return "uint8";
    }
    return NULL;
}

static int dtype_from_name(const char *s)
{
    static const int all[] = {GSB_F32, GSB_F64, GSB_I32, GSB_I64, GSB__WIRE_U8};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(s, dtype_wire_name(all[i])) == 0)
            return all[i];
    return 0;
}

static const char *json_kind(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* prod(shape) * itemsize, below 2^62, every step overflow-checked */
static int array_nbytes(int dtype, int ndim, const int64_t *shape, uint64_t *out)
{
    *out = 0;
    size_t isz = gsb__wire_itemsize(dtype);
    if (isz == 0)
        return gsb__err(GSB_EINVAL, "array: unknown dtype code %d", dtype);
    if (ndim < 0 || ndim > 2)
        return gsb__err(GSB_EINVAL, "array: ndim %d (0, 1 or 2 expected)", ndim);
    uint64_t n = isz;
    for (int k = 0; k < ndim; k++) {
        if (shape[k] < 0)
            return gsb__err(GSB_EINVAL, "array: negative dimension %lld", (long long)shape[k]);
        /* each dimension alone too, so that strides (dim * itemsize) of an
         * empty array such as [0, 2^60] cannot overflow either */
        if ((uint64_t)shape[k] >= WIRE_MAX_NBYTES / isz ||
            __builtin_mul_overflow(n, (uint64_t)shape[k], &n) || n >= WIRE_MAX_NBYTES)
            return gsb__err(GSB_EINVAL, "array: shape too large (the byte size must stay below "
                            "2^62)");
    }
    if (n >= WIRE_MAX_NBYTES)
        return gsb__err(GSB_EINVAL, "array: byte size must stay below 2^62");
    *out = n;
    return GSB_OK;
}

/* A required non-negative integer field (minimum lo). */
static int get_uint_field(const json_t *desc, const char *key, int64_t lo, uint64_t *out)
{
    const json_t *v = json_object_get(desc, key);
    if (!v)
        return gsb__err(GSB_EINVAL, "array descriptor: missing \"%s\"", key);
    if (!json_is_integer(v))
        return gsb__err(GSB_EINVAL, "array descriptor: \"%s\" must be an integer, not %s", key,
                        json_kind(v));
    json_int_t x = json_integer_value(v);
    if (x < lo)
        return gsb__err(GSB_EINVAL, "array descriptor: \"%s\" is %lld (at least %lld expected)",
                        key, (long long)x, (long long)lo);
    *out = (uint64_t)x;
    return GSB_OK;
}

int gsb__wire_array_parse(const json_t *desc, gsb__wire_array *out)
{
    memset(out, 0, sizeof *out); /* GSB__AT_NONE */
    /* a missing key reads as NULL and means "not given", like JSON null */
    if (!desc || json_is_null(desc))
        return GSB_OK;
    if (!json_is_object(desc))
        return gsb__err(GSB_EINVAL, "array descriptor must be an object or null, not %s",
                        json_kind(desc));
    gsb__wire_array a;
    memset(&a, 0, sizeof a);

    const json_t *v = json_object_get(desc, "dtype");
    if (!v)
        return gsb__err(GSB_EINVAL, "array descriptor: missing \"dtype\"");
    if (!json_is_string(v))
        return gsb__err(GSB_EINVAL, "array descriptor: \"dtype\" must be a string, not %s",
                        json_kind(v));
    a.dtype = dtype_from_name(json_string_value(v));
    if (!a.dtype)
        return gsb__err(GSB_EINVAL, "array descriptor: unknown dtype \"%.40s\" (float32, "
                        "float64, int32, int64 or uint8)", json_string_value(v));

    v = json_object_get(desc, "shape");
    if (!v)
        return gsb__err(GSB_EINVAL, "array descriptor: missing \"shape\"");
    if (!json_is_array(v))
        return gsb__err(GSB_EINVAL, "array descriptor: \"shape\" must be a list, not %s",
                        json_kind(v));
    size_t nd = json_array_size(v);
    if (nd > 2)
        return gsb__err(GSB_EINVAL, "array descriptor: shape has %zu dimensions (at most 2)",
                        nd);
    a.ndim = (int)nd;
    for (size_t k = 0; k < nd; k++) {
        const json_t *d = json_array_get(v, k);
        if (!json_is_integer(d))
            return gsb__err(GSB_EINVAL, "array descriptor: shape[%zu] must be an integer, not "
                            "%s", k, json_kind(d));
        json_int_t x = json_integer_value(d);
        if (x < 0)
            return gsb__err(GSB_EINVAL, "array descriptor: shape[%zu] is negative (%lld)", k,
                            (long long)x);
        a.shape[k] = (int64_t)x;
    }
    GSB_TRY(array_nbytes(a.dtype, a.ndim, a.shape, &a.nbytes));

    v = json_object_get(desc, "order");
    if (v) {
        const char *o = json_string_value(v);
        if (!o || (strcmp(o, "C") != 0 && strcmp(o, "F") != 0))
            return gsb__err(GSB_EINVAL, "array descriptor: \"order\" must be \"C\" or \"F\"");
        a.fortran = o[0] == 'F';
    }

    v = json_object_get(desc, "at");
    if (!v)
        return gsb__err(GSB_EINVAL, "array descriptor: missing \"at\"");
    const char *at = json_string_value(v);
    if (!at)
        return gsb__err(GSB_EINVAL, "array descriptor: \"at\" must be a string, not %s",
                        json_kind(v));
    if (strcmp(at, "inline") == 0)
        a.at = GSB__AT_INLINE;
    else if (strcmp(at, "chunks") == 0)
        a.at = GSB__AT_CHUNKS;
    else if (strcmp(at, "shm") == 0)
        a.at = GSB__AT_SHM;
    else if (strcmp(at, "data") == 0)
        a.at = GSB__AT_DATA;
    else
        return gsb__err(GSB_EINVAL, "array descriptor: unknown \"at\": \"%.40s\" (inline, "
                        "chunks, shm or data)", at);

    if (a.at == GSB__AT_INLINE || a.at == GSB__AT_SHM) {
        GSB_TRY(get_uint_field(desc, "offset", 0, &a.offset));
        if (a.offset % GSB__WIRE_ALIGN != 0)
            return gsb__err(GSB_EINVAL, "array descriptor: offset %llu is not a multiple of %d",
                            (unsigned long long)a.offset, GSB__WIRE_ALIGN);
    }
    if (a.at == GSB__AT_SHM)
        GSB_TRY(get_uint_field(desc, "segment", 0, &a.segment));
    if (a.at == GSB__AT_DATA)
        GSB_TRY(get_uint_field(desc, "handle", 1, &a.handle));
    *out = a;
    return GSB_OK;
}

json_t *gsb__wire_array_json(const gsb__wire_array *a)
{
    if (!a || a->at == GSB__AT_NONE)
        return json_null();
    const char *dt = dtype_wire_name(a->dtype);
    static const char *ats[] = {NULL, "inline", "chunks", "shm", "data"};
    /* values JSON cannot carry (json_int_t is signed) describe no valid array */
    if (!dt || a->ndim < 0 || a->ndim > 2 || a->at < GSB__AT_INLINE || a->at > GSB__AT_DATA ||
        a->offset > (uint64_t)INT64_MAX || a->segment > (uint64_t)INT64_MAX ||
        a->handle > (uint64_t)INT64_MAX)
        return NULL;
    json_t *o = json_object(), *shape = json_array();
    int bad = !o || !shape;
    for (int k = 0; !bad && k < a->ndim; k++)
        bad = json_array_append_new(shape, json_integer((json_int_t)a->shape[k])) != 0;
    if (!bad)
        bad = json_object_set_new(o, "dtype", json_string(dt)) ||
              json_object_set(o, "shape", shape) ||
              json_object_set_new(o, "order", json_string(a->fortran ? "F" : "C")) ||
              json_object_set_new(o, "at", json_string(ats[a->at]));
    if (!bad && (a->at == GSB__AT_INLINE || a->at == GSB__AT_SHM))
        bad = json_object_set_new(o, "offset", json_integer((json_int_t)a->offset));
    if (!bad && a->at == GSB__AT_SHM)
        bad = json_object_set_new(o, "segment", json_integer((json_int_t)a->segment));
    if (!bad && a->at == GSB__AT_DATA)
        bad = json_object_set_new(o, "handle", json_integer((json_int_t)a->handle));
    json_decref(shape);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int gsb__wire_inline_ptr(const gsb__frame *f, const gsb__wire_array *a, const void **out)
{
    *out = NULL;
    if (a->at != GSB__AT_INLINE)
        return gsb__err(GSB_EINVAL, "array is not in the frame's inline section");
    /* recomputed, so a descriptor built by hand cannot claim a smaller size */
    uint64_t n;
    GSB_TRY(array_nbytes(a->dtype, a->ndim, a->shape, &n));
    if (n != a->nbytes)
        return gsb__err(GSB_EINVAL, "array: nbytes %llu does not match its shape and dtype",
                        (unsigned long long)a->nbytes);
    if (a->offset % GSB__WIRE_ALIGN != 0)
        return gsb__err(GSB_EINVAL, "array: inline offset %llu is not a multiple of %d",
                        (unsigned long long)a->offset, GSB__WIRE_ALIGN);
    uint64_t have = f->body ? f->body_len : 0;
    if (a->offset > have || n > have - a->offset)
        return gsb__err(GSB_EINVAL, "array: bytes [%llu, %llu + %llu) lie outside the frame's "
                        "inline section of %llu bytes", (unsigned long long)a->offset,
                        (unsigned long long)a->offset, (unsigned long long)n,
                        (unsigned long long)have);
    *out = f->body ? (const void *)(f->body + a->offset) : (const void *)wire_empty;
    return GSB_OK;
}

gsb_array gsb__wire_as_array(const gsb__wire_array *a, void *data)
{
    gsb_array r;
    memset(&r, 0, sizeof r);
    r.data = data;
    r.dtype = (gsb_dtype)a->dtype;
    r.ndim = a->ndim;
    for (int k = 0; k < a->ndim && k < 2; k++)
        r.shape[k] = a->shape[k];
    /* strides {0, 0} is gsb.h's "contiguous C order"; Fortran needs them spelt out */
    if (a->fortran && a->ndim == 2) {
        int64_t isz = (int64_t)gsb__wire_itemsize(a->dtype);
        r.strides[0] = isz;
        r.strides[1] = isz * a->shape[0];
    }
    return r;
}

/* ---- outgoing messages ------------------------------------------------------ */

void gsb__outmsg_init(gsb__outmsg *m, uint64_t max_inline)
{
    memset(m, 0, sizeof *m);
    m->max_inline = max_inline;
    m->arrays = json_array(); /* NULL on OOM: every add then reports it */
}

void gsb__outmsg_clear(gsb__outmsg *m)
{
    if (!m)
        return;
    json_decref(m->arrays);
    free(m->parts);
    for (int i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    uint64_t mi = m->max_inline;
    memset(m, 0, sizeof *m);
    /* reusable: the next add creates the list again (outmsg_reserve) */
    m->max_inline = mi;
}

/* Room for `more` parts and one more owned buffer, so that everything after a
 * successful reserve cannot fail half-way. */
static int outmsg_reserve(gsb__outmsg *m, int more)
{
    if (!m->arrays) {
        m->arrays = json_array();
        if (!m->arrays)
            return gsb__err(GSB_ENOMEM, "out of memory building a message");
    }
    int used = m->n_inline + m->n_chunk;
    if (used + more > m->cap) {
        if (m->cap > INT_MAX / 4)
            return gsb__err(GSB_EINVAL, "too many arrays in one message");
        int cap = m->cap ? m->cap * 2 : 16;
        while (cap < used + more)
            cap *= 2;
        struct iovec *p = realloc(m->parts, (size_t)cap * sizeof *p);
        if (!p)
            return gsb__err(GSB_ENOMEM, "out of memory building a message");
        m->parts = p;
        m->cap = cap;
    }
    /* owned grows one at a time: a message holds a handful of arrays */
    void **o = realloc(m->owned, (size_t)(m->n_owned + 1) * sizeof *o);
    if (!o)
        return gsb__err(GSB_ENOMEM, "out of memory building a message");
    m->owned = o;
    return GSB_OK;
}

static void push_inline(gsb__outmsg *m, const void *p, size_t len)
{
    /* inline parts precede chunk parts: shift the chunk parts up by one */
    memmove(m->parts + m->n_inline + 1, m->parts + m->n_inline,
            (size_t)m->n_chunk * sizeof *m->parts);
    m->parts[m->n_inline].iov_base = (void *)p; /* only ever read: sendmsg's type */
    m->parts[m->n_inline].iov_len = len;
    m->n_inline++;
}

static void push_chunk(gsb__outmsg *m, const void *p, size_t len)
{
    m->parts[m->n_inline + m->n_chunk].iov_base = (void *)p;
    m->parts[m->n_inline + m->n_chunk].iov_len = len;
    m->n_chunk++;
}

/* Place w's nbytes at bytes: inline while the section stays within
 * max_inline (capped at the protocol's limit), else as chunks.  owned (may
 * be NULL) is freed with the message. */
static int outmsg_place(gsb__outmsg *m, gsb__wire_array *w, const void *bytes, void *owned)
{
    int rc = outmsg_reserve(m, 2);
    if (rc != GSB_OK) {
        free(owned);
        return rc;
    }
    if (w->nbytes > SIZE_MAX) {
        free(owned);
        return gsb__err(GSB_EINVAL, "array of %llu bytes is too large for this platform",
                        (unsigned long long)w->nbytes);
    }
    uint64_t cap = m->max_inline < GSB__WIRE_MAX_INLINE ? m->max_inline : GSB__WIRE_MAX_INLINE;
    uint64_t off = align_up(m->inline_len);
    if (w->nbytes == 0) {
        w->at = GSB__AT_INLINE; /* no bytes: offset 0 lies inside any section */
        w->offset = 0;
    } else if (off <= cap && w->nbytes <= cap - off) {
        w->at = GSB__AT_INLINE;
        w->offset = off;
    } else {
        w->at = GSB__AT_CHUNKS;
    }
    json_t *j = gsb__wire_array_json(w);
    if (!j || json_array_append_new(m->arrays, j) != 0) {
        free(owned);
        return gsb__err(GSB_ENOMEM, "out of memory building a message");
    }
    if (owned)
        m->owned[m->n_owned++] = owned;
    if (w->nbytes > 0 && w->at == GSB__AT_INLINE) {
        if (off > m->inline_len)
            push_inline(m, wire_zeros, (size_t)(off - m->inline_len));
        push_inline(m, bytes, (size_t)w->nbytes);
        m->inline_len = off + w->nbytes;
    } else if (w->at == GSB__AT_CHUNKS) {
        push_chunk(m, bytes, (size_t)w->nbytes);
        m->chunk_len += w->nbytes;
    }
    return GSB_OK;
}

static int append_null(gsb__outmsg *m)
{
    GSB_TRY(outmsg_reserve(m, 0));
    if (json_array_append_new(m->arrays, json_null()) != 0)
        return gsb__err(GSB_ENOMEM, "out of memory building a message");
    return GSB_OK;
}

/* Copy a strided (possibly negative-stride) array into C order. */
static void pack_c(const gsb_array *a, int64_t s0, int64_t s1, size_t isz, uint8_t *dst)
{
    int64_t rows = a->ndim >= 1 ? a->shape[0] : 1;
    int64_t cols = a->ndim == 2 ? a->shape[1] : 1;
    const uint8_t *base = a->data;
    for (int64_t i = 0; i < rows; i++) {
        const uint8_t *row = base + (ptrdiff_t)i * s0;
        if (s1 == (int64_t)isz) {
            memcpy(dst, row, (size_t)cols * isz);
            dst += (size_t)cols * isz;
        } else {
            for (int64_t j = 0; j < cols; j++, dst += isz)
                memcpy(dst, row + (ptrdiff_t)j * s1, isz);
        }
    }
}

int gsb__outmsg_add(gsb__outmsg *m, const gsb_array *a)
{
    if (!a || (!a->data && a->ndim == 0))
        return append_null(m);
    if (a->strides[1] == GSB_DATA_REF_STRIDE)
        return gsb__err(GSB_EINVAL, "a data handle reference must be added as a placed array");
    /* a gsb_dtype only (uint8 is the wire's, for blobs); gsb__wire_itemsize
     * rather than gsb_dtype_size keeps this file free of the engine, so the
     * fuzz target links it alone */
    size_t isz = (int)a->dtype == GSB__WIRE_U8 ? 0 : gsb__wire_itemsize((int)a->dtype);
    if (isz == 0)
        return gsb__err(GSB_EINVAL, "array: unknown dtype code %d", (int)a->dtype);
    gsb__wire_array w;
    memset(&w, 0, sizeof w);
    w.dtype = a->dtype;
    w.ndim = a->ndim;
    for (int k = 0; k < a->ndim && k < 2; k++)
        w.shape[k] = a->shape[k];
    GSB_TRY(array_nbytes(w.dtype, w.ndim, w.shape, &w.nbytes));
    if (w.nbytes > 0 && !a->data)
        return gsb__err(GSB_EINVAL, "array: no data pointer for %llu bytes",
                        (unsigned long long)w.nbytes);

    /* the byte strides gsb.h means ({0, 0}: contiguous C order) */
    int64_t s0 = 0, s1 = 0, si = (int64_t)isz;
    if (a->strides[0] == 0 && a->strides[1] == 0) {
        s0 = a->ndim == 2 ? si * a->shape[1] : si;
        s1 = si;
    } else {
        s0 = a->strides[0];
        s1 = a->ndim == 2 ? a->strides[1] : si;
    }
    int64_t rows = a->ndim >= 1 ? a->shape[0] : 1, cols = a->ndim == 2 ? a->shape[1] : 1;
    int c_contig = a->ndim == 0 || w.nbytes == 0 ||
                   ((s1 == si || cols <= 1) && (s0 == si * cols || rows <= 1));
    int f_contig = a->ndim == 2 && (s0 == si || rows <= 1) && (s1 == si * rows || cols <= 1);
    if (c_contig)
        return outmsg_place(m, &w, a->data, NULL); /* referenced in place, no copy */
    if (f_contig) {
        w.fortran = 1;
        return outmsg_place(m, &w, a->data, NULL);
    }
    uint8_t *buf = malloc((size_t)w.nbytes);
    if (!buf)
        return gsb__err(GSB_ENOMEM, "out of memory packing a strided array of %llu bytes",
                        (unsigned long long)w.nbytes);
    pack_c(a, s0, s1, isz, buf);
    return outmsg_place(m, &w, buf, buf);
}

int gsb__outmsg_add_bytes(gsb__outmsg *m, const void *bytes, size_t len)
{
    if (len > 0 && !bytes)
        return gsb__err(GSB_EINVAL, "no data pointer for %zu bytes", len);
    if ((uint64_t)len >= WIRE_MAX_NBYTES)
        return gsb__err(GSB_EINVAL, "%zu bytes exceed the protocol's array size limit", len);
    gsb__wire_array w;
    memset(&w, 0, sizeof w);
    w.dtype = GSB__WIRE_U8;
    w.ndim = 1;
    w.shape[0] = (int64_t)len;
    w.nbytes = len;
    return outmsg_place(m, &w, bytes, NULL);
}

int gsb__outmsg_add_placed(gsb__outmsg *m, const gsb__wire_array *a)
{
    if (!a || a->at == GSB__AT_NONE)
        return append_null(m);
    if (a->at != GSB__AT_SHM && a->at != GSB__AT_DATA)
        return gsb__err(GSB_EINVAL, "only shared-memory and data-handle arrays can be added "
                        "as placed");
    uint64_t n;
    GSB_TRY(array_nbytes(a->dtype, a->ndim, a->shape, &n));
    if (a->at == GSB__AT_SHM && a->offset % GSB__WIRE_ALIGN != 0)
        return gsb__err(GSB_EINVAL, "array: shared-memory offset %llu is not a multiple of %d",
                        (unsigned long long)a->offset, GSB__WIRE_ALIGN);
    if (a->at == GSB__AT_DATA && a->handle == 0)
        return gsb__err(GSB_EINVAL, "array: data handle 0 is not valid");
    GSB_TRY(outmsg_reserve(m, 0));
    json_t *j = gsb__wire_array_json(a);
    if (!j)
        return gsb__err(GSB_EINVAL, "array: descriptor cannot be written (offset, segment or "
                        "handle out of range)");
    if (json_array_append_new(m->arrays, j) != 0)
        return gsb__err(GSB_ENOMEM, "out of memory building a message");
    return GSB_OK;
}

/* ---- sending ---------------------------------------------------------------- */

#ifdef _WIN32
static int io_err(const char *what, int err)
{
    if (err == WSAECONNRESET || err == WSAECONNABORTED || err == WSAESHUTDOWN)
        return gsb__err(GSB_EIO, "%s failed: connection closed by the peer", what);
    if (err == WSAETIMEDOUT)
        return gsb__err(GSB_EIO, "%s failed: timed out", what);
    char buf[256];
    return gsb__err(GSB_EIO, "%s failed: %s", what, gsb__net_strerror(err, buf, sizeof buf));
}
#else
static int io_err(const char *what, int err)
{
    if (err == EPIPE || err == ECONNRESET)
        return gsb__err(GSB_EIO, "%s failed: connection closed by the peer", what);
    if (err == EAGAIN || err == EWOULDBLOCK)
        return gsb__err(GSB_EIO, "%s failed: timed out", what);
    return gsb__err(GSB_EIO, "%s failed: %s", what, strerror(err));
}
#endif

/* Drop n bytes from the front of iov[0..*cnt), moving *iov past finished parts. */
static void iov_advance(struct iovec **iov, int *cnt, size_t n)
{
    while (*cnt > 0 && n >= (*iov)->iov_len) {
        n -= (*iov)->iov_len;
        (*iov)++;
        (*cnt)--;
    }
    if (*cnt > 0 && n > 0) {
        (*iov)->iov_base = (uint8_t *)(*iov)->iov_base + n;
        (*iov)->iov_len -= n;
    }
}

#ifdef _WIN32
/* Write all of iov (which is consumed) by WSASend's gather I/O; Windows
 * cannot pass descriptors, so pass_fd must be -1 (no shm on Windows). */
static int send_all(int sock, struct iovec *iov, int cnt, int pass_fd)
{
    if (pass_fd >= 0)
        return gsb__err(GSB_EUNSUPPORTED, "file descriptors cannot travel on Windows sockets");
    WSABUF wb[64];
    for (;;) {
        while (cnt > 0 && iov->iov_len == 0) {
            iov++;
            cnt--;
        }
        if (cnt == 0)
            return GSB_OK;
        DWORD k = 0;
        for (int i = 0; i < cnt && k < 64; i++) {
            size_t len = iov[i].iov_len;
            wb[k].buf = (CHAR *)iov[i].iov_base;
            wb[k].len = (ULONG)(len > ((size_t)1 << 30) ? (size_t)1 << 30 : len);
            k++;
            if (len > ((size_t)1 << 30))
                break; /* a partial part must be the last one of this call */
        }
        DWORD w = 0;
        if (WSASend((SOCKET)(size_t)sock, wb, k, &w, 0, NULL, NULL) != 0)
            return io_err("send", WSAGetLastError());
        if (w == 0)
            return gsb__err(GSB_EIO, "send failed: the socket accepted no bytes");
        iov_advance(&iov, &cnt, (size_t)w);
    }
}
#else
/* Write all of iov (which is consumed), in as few sendmsg calls as the kernel
 * allows; pass_fd rides with the first byte. */
static int send_all(int sock, struct iovec *iov, int cnt, int pass_fd)
{
    int fd_pending = pass_fd >= 0;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } cm;
    for (;;) {
        while (cnt > 0 && iov->iov_len == 0) {
            iov++;
            cnt--;
        }
        if (cnt == 0)
            break;
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = iov;
        mh.msg_iovlen = (size_t)(cnt > IOV_MAX ? IOV_MAX : cnt);
        if (fd_pending) {
            memset(&cm, 0, sizeof cm);
            mh.msg_control = cm.buf;
            mh.msg_controllen = sizeof cm.buf;
            struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
        }
        ssize_t w = sendmsg(sock, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return io_err("send", errno);
        }
        if (w == 0)
            return gsb__err(GSB_EIO, "send failed: the socket accepted no bytes");
        fd_pending = 0;
        iov_advance(&iov, &cnt, (size_t)w);
    }
    if (fd_pending)
        return gsb__err(GSB_EINTERNAL, "a file descriptor cannot travel without bytes");
    return GSB_OK;
}
#endif

static int send_hdr_check(uint16_t type, uint64_t req_id, uint64_t length, uint32_t head_len,
                          uint8_t out[GSB__WIRE_HDR_SIZE])
{
    gsb__frame_hdr h = {GSB__WIRE_VERSION, type, req_id, length, head_len, 0};
    /* never put on the wire what a receiver must refuse */
    int rc = check_hdr(&h);
    if (rc != GSB_OK) {
        char why[512]; /* a copy: the message buffer is also the destination */
        snprintf(why, sizeof why, "%s", gsb_errmsg());
        return gsb__err(rc, "cannot send: %s", why);
    }
    gsb__hdr_encode(&h, out);
    return GSB_OK;
}

/* The chunked arrays' bytes, parts[0..n) back to back, as CHUNK frames. */
static int send_chunks(int sock, uint64_t req_id, const struct iovec *parts, int n,
                       uint64_t total)
{
    struct iovec *iov = malloc(((size_t)n + 1) * sizeof *iov);
    if (!iov)
        return gsb__err(GSB_ENOMEM, "out of memory sending chunks");
    int rc = GSB_OK;
    int pi = 0;
    size_t poff = 0;
    uint8_t hb[GSB__WIRE_HDR_SIZE];
    while (total > 0) {
        size_t len = total < GSB__WIRE_CHUNK_SEND ? (size_t)total : GSB__WIRE_CHUNK_SEND;
        GSB_CHECK(send_hdr_check(GSB__F_CHUNK, req_id, len, 0, hb));
        iov[0].iov_base = hb;
        iov[0].iov_len = sizeof hb;
        int k = 1;
        size_t need = len;
        while (need > 0) {
            if (pi >= n) {
                rc = gsb__err(GSB_EINTERNAL, "message chunk length exceeds its parts");
                goto done;
            }
            size_t avail = parts[pi].iov_len - poff;
            if (avail == 0) {
                pi++;
                poff = 0;
                continue;
            }
            size_t take = avail < need ? avail : need;
            iov[k].iov_base = (uint8_t *)parts[pi].iov_base + poff;
            iov[k].iov_len = take;
            k++;
            poff += take;
            need -= take;
        }
        GSB_CHECK(send_all(sock, iov, k, -1));
        total -= len;
    }
done:
    free(iov);
    return rc;
}

int gsb__wire_send(int sock, uint16_t type, uint64_t req_id, json_t *head,
                   const char *arrays_key, const gsb__outmsg *msg, int pass_fd)
{
    int rc = GSB_OK;
    json_t *own_head = NULL;
    char *txt = NULL;
    struct iovec *iov = NULL;
    size_t head_len = 0;
    if (msg) {
        if (!msg->arrays)
            return gsb__err(GSB_ENOMEM, "out of memory building a message");
        if (!head)
            head = own_head = json_object();
        if (!head || json_object_set(head, arrays_key ? arrays_key : "arrays", msg->arrays)) {
            rc = gsb__err(GSB_ENOMEM, "out of memory building a message");
            goto done;
        }
    }
    if (head) {
        if (!json_is_object(head)) {
            rc = gsb__err(GSB_EINTERNAL, "a frame head must be a JSON object");
            goto done;
        }
        txt = json_dumps(head, JSON_COMPACT);
        if (!txt) {
            rc = gsb__err(GSB_ENOMEM, "cannot serialize a frame head (out of memory)");
            goto done;
        }
        head_len = strlen(txt);
        if (head_len > GSB__WIRE_MAX_HEAD) {
            rc = gsb__err(GSB_EINVAL, "frame head of %zu bytes exceeds the limit of %u "
                          "(too many or too long names?)", head_len,
                          (unsigned)GSB__WIRE_MAX_HEAD);
            goto done;
        }
    }
    uint64_t inline_len = msg ? msg->inline_len : 0;
    int n_inline = msg ? msg->n_inline : 0;
    uint8_t hb[GSB__WIRE_HDR_SIZE];
    GSB_CHECK(send_hdr_check(type, req_id, head_len + inline_len, (uint32_t)head_len, hb));
    iov = malloc(((size_t)n_inline + 2) * sizeof *iov);
    if (!iov) {
        rc = gsb__err(GSB_ENOMEM, "out of memory sending a frame");
        goto done;
    }
    int k = 0;
    iov[k].iov_base = hb;
    iov[k++].iov_len = sizeof hb;
    if (head_len > 0) {
        iov[k].iov_base = txt;
        iov[k++].iov_len = head_len;
    }
    for (int i = 0; i < n_inline; i++)
        iov[k++] = msg->parts[i];
    GSB_CHECK(send_all(sock, iov, k, pass_fd));
    if (msg && msg->chunk_len > 0)
        GSB_CHECK(send_chunks(sock, req_id, msg->parts + msg->n_inline, msg->n_chunk,
                              msg->chunk_len));
done:
    free(iov);
    free(txt);
    json_decref(own_head);
    return rc;
}

int gsb__wire_send_empty(int sock, uint16_t type, uint64_t req_id)
{
    uint8_t hb[GSB__WIRE_HDR_SIZE];
    GSB_TRY(send_hdr_check(type, req_id, 0, 0, hb));
    struct iovec iov = {hb, sizeof hb};
    return send_all(sock, &iov, 1, -1);
}

/* ---- receiving -------------------------------------------------------------- */

static int64_t now_ms(void)
{
#ifdef _WIN32
    return (int64_t)GetTickCount64();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
#endif
}

/* Wait until sock has a byte (or EOF/error) to read; GSB_ECANCELLED on timeout. */
static int wait_readable(int sock, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left < 0)
            left = 0;
        struct pollfd p = {sock, POLLIN, 0};
        int r = gsb__poll(&p, 1, (int)left);
        if (r > 0) {
            if (p.revents & POLLNVAL)
                return gsb__err(GSB_EIO, "receive failed: not an open socket");
            return GSB_OK; /* data, EOF or an error: the read reports which */
        }
        if (r == 0)
            return gsb__err(GSB_ECANCELLED, "timed out after %d ms waiting for a frame",
                            timeout_ms);
        int err = gsb__sock_errno();
        if (err != EINTR)
            return io_err("poll", err);
    }
}

static int closed_err(size_t got)
{
    if (got == 0)
        return gsb__err(GSB_EIO, "connection closed");
    return gsb__err(GSB_EIO, "connection closed in the middle of a frame");
}

/* Read exactly len bytes (len > 0 total; got counts bytes of this frame
 * already read, for the message). */
static int read_full(int sock, void *buf, size_t len, size_t got)
{
    uint8_t *p = buf;
    while (len > 0) {
#ifdef _WIN32
        int r = recv((SOCKET)(size_t)sock, (char *)p, len > INT_MAX ? INT_MAX : (int)len,
                     MSG_WAITALL);
        if (r < 0)
            return io_err("receive", WSAGetLastError());
#else
        ssize_t r = recv(sock, p, len, MSG_WAITALL);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return io_err("receive", errno);
        }
#endif
        if (r == 0)
            return closed_err(got);
        p += r;
        len -= (size_t)r;
        got += (size_t)r;
    }
    return GSB_OK;
}

/* Scatter-read exactly the bytes of iov[0..cnt) (consumed). */
#ifdef _WIN32
static int read_iov_full(int sock, struct iovec *iov, int cnt)
{
    for (int i = 0; i < cnt; i++)
        if (iov[i].iov_len > 0)
            GSB_TRY(read_full(sock, iov[i].iov_base, iov[i].iov_len, 1));
    return GSB_OK;
}
#else
static int read_iov_full(int sock, struct iovec *iov, int cnt)
{
    for (;;) {
        while (cnt > 0 && iov->iov_len == 0) {
            iov++;
            cnt--;
        }
        if (cnt == 0)
            return GSB_OK;
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = iov;
        mh.msg_iovlen = (size_t)(cnt > IOV_MAX ? IOV_MAX : cnt);
        ssize_t r = recvmsg(sock, &mh, MSG_WAITALL);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return io_err("receive", errno);
        }
        if (r == 0)
            return closed_err(1);
        iov_advance(&iov, &cnt, (size_t)r);
    }
}
#endif

/* Read the 32 header bytes with recvmsg so a descriptor passed with them is
 * caught (received close-on-exec).  At most one fd per frame: extras, and a
 * truncated control message, close everything received and fail. */
#ifdef _WIN32
static int read_hdr(int sock, uint8_t hb[GSB__WIRE_HDR_SIZE], int *out_fd)
{
    *out_fd = -1; /* no descriptors travel on Windows */
    return read_full(sock, hb, GSB__WIRE_HDR_SIZE, 0);
}
#else
static int read_hdr(int sock, uint8_t hb[GSB__WIRE_HDR_SIZE], int *out_fd)
{
    *out_fd = -1;
    int bad_fds = 0, rc = GSB_OK;
    size_t got = 0;
    union {
        char buf[CMSG_SPACE(WIRE_MAX_FDS * sizeof(int))];
        struct cmsghdr align;
    } cm;
    while (got < GSB__WIRE_HDR_SIZE) {
        struct iovec iov = {hb + got, GSB__WIRE_HDR_SIZE - got};
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cm.buf;
        mh.msg_controllen = sizeof cm.buf;
        ssize_t r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = io_err("receive", errno);
            goto done;
        }
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < nfd; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                if (*out_fd < 0 && !bad_fds) {
                    *out_fd = fd;
                } else {
                    close(fd);
                    bad_fds = 1;
                }
            }
        }
        if (mh.msg_flags & MSG_CTRUNC)
            bad_fds = 1;
        if (r == 0) {
            rc = closed_err(got);
            goto done;
        }
        got += (size_t)r;
    }
    if (bad_fds)
        rc = gsb__err(GSB_EINVAL, "bad frame: more than one file descriptor came with it");
done:
    if (rc != GSB_OK && *out_fd >= 0) {
        close(*out_fd);
        *out_fd = -1;
    }
    return rc;
}
#endif

/* Read and drop len bytes of the frame being received. */
static int skip_bytes(int sock, uint64_t len, size_t got)
{
    uint8_t sink[16384];
    while (len > 0) {
        size_t k = len < sizeof sink ? (size_t)len : sizeof sink;
        GSB_TRY(read_full(sock, sink, k, got));
        len -= k;
        got += k;
    }
    return GSB_OK;
}

int gsb__wire_recv(int sock, gsb__frame *out, uint64_t max_inline, int timeout_ms)
{
    return gsb__wire_recv_budgeted(sock, out, max_inline, timeout_ms, NULL);
}

int gsb__wire_recv_budgeted(int sock, gsb__frame *out, uint64_t max_inline, int timeout_ms,
                            const gsb__wire_budget *budget)
{
    frame_init(out);
    if (timeout_ms >= 0)
        GSB_TRY(wait_readable(sock, timeout_ms));
    uint8_t hb[GSB__WIRE_HDR_SIZE];
    int fd = -1;
    GSB_TRY(read_hdr(sock, hb, &fd));
    gsb__frame f;
    frame_init(&f);
    f.fd = fd; /* from here on, gsb__frame_clear(&f) releases everything */
    uint8_t *hbuf = NULL;
    int rc = gsb__hdr_decode(hb, &f.hdr);
    if (rc != GSB_OK)
        goto done;
    uint64_t body_len = f.hdr.length - f.hdr.head_len;
    if (body_len > max_inline) {
        rc = gsb__err(GSB_EINVAL, "bad frame: inline section of %llu bytes exceeds this "
                      "side's limit of %llu", (unsigned long long)body_len,
                      (unsigned long long)max_inline);
        goto done;
    }
    if (budget) {
        rc = budget->take(budget->ctx, f.hdr.length);
        if (rc == GSB_ENOMEM) {
            f.refused = rc;
            rc = GSB_OK;
        } else if (rc != GSB_OK) {
            goto done;
        }
    }
    size_t map_from = budget ? budget->map_from : 0;
    if (f.hdr.head_len > 0) {
        hbuf = map_from && f.hdr.head_len >= map_from ? gsb__host_alloc_mapped(f.hdr.head_len)
                                                      : gsb__host_alloc(f.hdr.head_len);
        if (!hbuf) {
            rc = gsb__err(GSB_ENOMEM, "out of memory for a frame head");
            goto done;
        }
        GSB_CHECK(read_full(sock, hbuf, f.hdr.head_len, GSB__WIRE_HDR_SIZE));
    }
    if (body_len > 0 && f.refused) {
        GSB_CHECK(skip_bytes(sock, body_len, GSB__WIRE_HDR_SIZE + f.hdr.head_len));
    } else if (body_len > 0) {
        /* straight into the aligned buffer the caller keeps: no copy */
        f.body = body_alloc(body_len, map_from);
        if (!f.body) {
            rc = gsb__err(GSB_ENOMEM, "out of memory for a frame of %llu bytes",
                          (unsigned long long)body_len);
            goto done;
        }
        f.body_len = (size_t)body_len;
        GSB_CHECK(read_full(sock, f.body, f.body_len, GSB__WIRE_HDR_SIZE));
    }
    /* parsed only once the whole frame is read, so a bad head leaves the
     * stream at a frame boundary */
    if (f.hdr.head_len > 0)
        GSB_CHECK(parse_head(hbuf, f.hdr.head_len, &f.head));
done:
    gsb__host_free(hbuf);
    if (rc != GSB_OK) {
        gsb__frame_clear(&f);
        return rc;
    }
    *out = f;
    return GSB_OK;
}

/* A CHUNK header of request req_id with 0 < length <= left. */
static int read_chunk_hdr(int sock, uint64_t req_id, uint64_t left, uint64_t *length)
{
    uint8_t hb[GSB__WIRE_HDR_SIZE];
    gsb__frame_hdr h;
    GSB_TRY(read_full(sock, hb, sizeof hb, 1));
    GSB_TRY(gsb__hdr_decode(hb, &h));
    if (h.type != GSB__F_CHUNK)
        return gsb__err(GSB_EINVAL, "bad frame: expected a CHUNK frame, got %s",
                        type_name(h.type));
    if (h.req_id != req_id)
        return gsb__err(GSB_EINVAL, "bad frame: CHUNK of request %llu while receiving request "
                        "%llu", (unsigned long long)h.req_id, (unsigned long long)req_id);
    if (h.length == 0 || h.length > left)
        return gsb__err(GSB_EINVAL, "bad frame: CHUNK of %llu bytes when %llu bytes of chunked "
                        "arrays remain", (unsigned long long)h.length,
                        (unsigned long long)left);
    *length = h.length;
    return GSB_OK;
}

void gsb__chunk_reader_init(gsb__chunk_reader *r, int sock, uint64_t req_id, uint64_t total)
{
    r->sock = sock;
    r->req_id = req_id;
    r->left_total = total;
    r->left_frame = 0;
}

int gsb__chunk_read(gsb__chunk_reader *r, void *dst, size_t len)
{
    if (len > r->left_total)
        return gsb__err(GSB_EINTERNAL, "chunk_read: %zu bytes asked, %llu left", len,
                        (unsigned long long)r->left_total);
    uint8_t *p = dst;
    while (len > 0) {
        if (r->left_frame == 0)
            GSB_TRY(read_chunk_hdr(r->sock, r->req_id, r->left_total, &r->left_frame));
        size_t take = len < r->left_frame ? len : (size_t)r->left_frame;
        GSB_TRY(read_full(r->sock, p, take, 1));
        p += take;
        len -= take;
        r->left_frame -= take;
        r->left_total -= take;
    }
    return GSB_OK;
}

int gsb__wire_recv_chunks(int sock, uint64_t req_id, const struct iovec *dst, int n)
{
    if (n < 0 || (n > 0 && !dst))
        return gsb__err(GSB_EINTERNAL, "recv_chunks: bad destination list");
    uint64_t total = 0;
    for (int i = 0; i < n; i++)
        if (__builtin_add_overflow(total, (uint64_t)dst[i].iov_len, &total))
            return gsb__err(GSB_EINVAL, "chunked arrays too large");
    if (total == 0)
        return GSB_OK;
    struct iovec *iov = malloc(((size_t)n) * sizeof *iov);
    if (!iov)
        return gsb__err(GSB_ENOMEM, "out of memory receiving chunks");
    int rc = GSB_OK, di = 0;
    size_t doff = 0;
    while (total > 0) {
        gsb__frame_hdr h;
        GSB_CHECK(read_chunk_hdr(sock, req_id, total, &h.length));
        /* slice the destination buffers for this frame's payload */
        int k = 0;
        uint64_t need = h.length;
        while (need > 0) { /* need <= total: the slices never run past dst[n-1] */
            size_t avail = dst[di].iov_len - doff;
            if (avail == 0) {
                di++;
                doff = 0;
                continue;
            }
            size_t take = avail < need ? avail : (size_t)need;
            iov[k].iov_base = (uint8_t *)dst[di].iov_base + doff;
            iov[k].iov_len = take;
            k++;
            doff += take;
            need -= take;
        }
        GSB_CHECK(read_iov_full(sock, iov, k));
        total -= h.length;
    }
done:
    free(iov);
    return rc;
}
