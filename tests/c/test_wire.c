/*
 * test_wire.c - the frame/array/socket layer (src/net/wire.c, src/net/sock.c):
 * header codec and its rejections, frame parsing, array descriptors and their
 * rejections, building messages from C/F/strided arrays, send/receive over
 * socket pairs (inline, chunked, with a passed fd, timeouts, closed peers),
 * URL parsing and listening/connecting on TCP and Unix sockets.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/hostmem.h"
#include "core/data.h"
#include "net/wire.h"
#include "testing.h"

static uint64_t rnd_u64(void)
{
    uint64_t a = (uint64_t)(testing_uniform() * 4294967296.0);
    uint64_t b = (uint64_t)(testing_uniform() * 4294967296.0);
    return a << 32 ^ b;
}
static int64_t rnd_int(int64_t lo, int64_t hi) /* [lo, hi] */
{
    return lo + (int64_t)(testing_uniform() * (double)(hi - lo + 1));
}

static int count_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* ---- header ---------------------------------------------------------------- */

static void test_hdr_roundtrip(void)
{
    testing_seed(1);
    for (int it = 0; it < 2000; it++) {
        gsb__frame_hdr h = {GSB__WIRE_VERSION, (uint16_t)rnd_int(1, 8), rnd_u64(), 0, 0, 0};
        if (h.type == GSB__F_CHUNK) {
            h.length = (uint64_t)rnd_int(0, (int64_t)GSB__WIRE_MAX_CHUNK);
        } else if (h.type != GSB__F_CANCEL) {
            h.head_len = (uint32_t)rnd_int(0, GSB__WIRE_MAX_HEAD);
            h.length = h.head_len + (uint64_t)rnd_int(0, (int64_t)GSB__WIRE_MAX_INLINE);
        }
        uint8_t b[GSB__WIRE_HDR_SIZE];
        gsb__hdr_encode(&h, b);
        gsb__frame_hdr d;
        CHECK_OK(gsb__hdr_decode(b, &d));
        CHECK(d.version == h.version && d.type == h.type && d.req_id == h.req_id &&
              d.length == h.length && d.head_len == h.head_len && d.flags == 0);
    }
    /* the byte layout of PROTOCOL.md, little-endian */
    gsb__frame_hdr h = {1, GSB__F_REQUEST, 0x0102030405060708ull, 0x1000, 0x20, 0};
    uint8_t b[GSB__WIRE_HDR_SIZE];
    gsb__hdr_encode(&h, b);
    static const uint8_t want[32] = {'G', 'S', 'B', '1', 1, 0, 3, 0, 8, 7, 6, 5, 4, 3, 2, 1,
                                     0, 0x10, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0};
    CHECK(memcmp(b, want, 32) == 0);
}

static int decode_fields(uint16_t version, uint16_t type, uint64_t length, uint32_t head_len,
                         uint32_t flags)
{
    gsb__frame_hdr h = {version, type, 7, length, head_len, flags};
    uint8_t b[GSB__WIRE_HDR_SIZE];
    gsb__hdr_encode(&h, b);
    gsb__frame_hdr d;
    return gsb__hdr_decode(b, &d);
}

static void test_hdr_rejects(void)
{
    uint8_t b[GSB__WIRE_HDR_SIZE];
    gsb__frame_hdr h = {1, GSB__F_REPLY, 1, 10, 10, 0}, d;
    gsb__hdr_encode(&h, b);
    CHECK_OK(gsb__hdr_decode(b, &d));
    b[3] = '2';
    CHECK_ERR(gsb__hdr_decode(b, &d), GSB_EINVAL, "magic");
    memcpy(b, "GET ", 4); /* an HTTP client on the port */
    CHECK_ERR(gsb__hdr_decode(b, &d), GSB_EINVAL, "magic");
    CHECK_ERR(decode_fields(2, GSB__F_REPLY, 0, 0, 0), GSB_EINVAL, "version 2");
    CHECK_ERR(decode_fields(0, GSB__F_REPLY, 0, 0, 0), GSB_EINVAL, "version 0");
    CHECK_ERR(decode_fields(1, 0, 0, 0, 0), GSB_EINVAL, "unknown frame type 0");
    CHECK_ERR(decode_fields(1, 9, 0, 0, 0), GSB_EINVAL, "unknown frame type 9");
    CHECK_ERR(decode_fields(1, 0xffff, 0, 0, 0), GSB_EINVAL, "unknown frame type");
    CHECK_ERR(decode_fields(1, GSB__F_REPLY, 0, 0, 1), GSB_EINVAL, "flags");
    CHECK_ERR(decode_fields(1, GSB__F_REPLY, 0, 0, 0x80000000u), GSB_EINVAL, "flags");
    CHECK_ERR(decode_fields(1, GSB__F_REPLY, 9, 10, 0), GSB_EINVAL, "head_len");
    CHECK_ERR(decode_fields(1, GSB__F_REPLY, 0, 1, 0), GSB_EINVAL, "head_len");
    /* limits, at and one past them */
    CHECK_OK(decode_fields(1, GSB__F_REQUEST, GSB__WIRE_MAX_HEAD, GSB__WIRE_MAX_HEAD, 0));
    CHECK_ERR(decode_fields(1, GSB__F_REQUEST, GSB__WIRE_MAX_HEAD + 1, GSB__WIRE_MAX_HEAD + 1,
                            0), GSB_EINVAL, "head of");
    CHECK_ERR(decode_fields(1, GSB__F_REQUEST, UINT64_MAX, UINT32_MAX, 0), GSB_EINVAL, "head");
    CHECK_OK(decode_fields(1, GSB__F_REQUEST, 100 + GSB__WIRE_MAX_INLINE, 100, 0));
    CHECK_ERR(decode_fields(1, GSB__F_REQUEST, 101 + GSB__WIRE_MAX_INLINE, 100, 0), GSB_EINVAL,
              "inline section");
    CHECK_ERR(decode_fields(1, GSB__F_REPLY, UINT64_MAX, 0, 0), GSB_EINVAL, "inline section");
    CHECK_OK(decode_fields(1, GSB__F_CHUNK, GSB__WIRE_MAX_CHUNK, 0, 0));
    CHECK_ERR(decode_fields(1, GSB__F_CHUNK, GSB__WIRE_MAX_CHUNK + 1, 0, 0), GSB_EINVAL,
              "CHUNK of");
    CHECK_ERR(decode_fields(1, GSB__F_CHUNK, 10, 2, 0), GSB_EINVAL, "no head");
    CHECK_OK(decode_fields(1, GSB__F_CANCEL, 0, 0, 0));
    CHECK_ERR(decode_fields(1, GSB__F_CANCEL, 5, 0, 0), GSB_EINVAL, "CANCEL");
}

/* ---- frame parser ------------------------------------------------------------ */

static json_t *random_json(int depth)
{
    int kind = (int)rnd_int(0, depth > 2 ? 3 : 5);
    char s[32];
    switch (kind) {
    case 0: return json_integer((json_int_t)rnd_u64());
    case 1: return json_real(testing_normal() * 1e10);
    case 2:
        snprintf(s, sizeof s, "s\xc3\xa9%llu\"\\", (unsigned long long)rnd_int(0, 1000000));
        return json_string(s);
    case 3: return rnd_int(0, 1) ? json_true() : json_null();
    case 4: {
        json_t *a = json_array();
        for (int i = (int)rnd_int(0, 4); i > 0; i--)
            json_array_append_new(a, random_json(depth + 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        for (int i = (int)rnd_int(0, 4); i > 0; i--) {
            snprintf(s, sizeof s, "k%d", (int)rnd_int(0, 99));
            json_object_set_new(o, s, random_json(depth + 1));
        }
        return o;
    }
    }
}

static void test_frame_parse(void)
{
    testing_seed(2);
    for (int it = 0; it < 300; it++) {
        json_t *head = json_object();
        for (int i = (int)rnd_int(0, 6); i > 0; i--) {
            char k[16];
            snprintf(k, sizeof k, "key%d", i);
            json_object_set_new(head, k, random_json(0));
        }
        char *txt = json_dumps(head, JSON_COMPACT);
        size_t hl = rnd_int(0, 5) == 0 ? 0 : strlen(txt);
        size_t bl = (size_t)rnd_int(0, 3000);
        uint8_t *payload = malloc(hl + bl + 1);
        memcpy(payload, txt, hl);
        for (size_t i = 0; i < bl; i++)
            payload[hl + i] = (uint8_t)rnd_int(0, 255);
        gsb__frame_hdr h = {1, (uint16_t)rnd_int(1, 6), rnd_u64(), hl + bl, (uint32_t)hl, 0};
        gsb__frame f;
        CHECK_OK(gsb__frame_parse(&h, payload, &f));
        CHECK(f.fd == -1 && f.hdr.req_id == h.req_id && f.hdr.type == h.type);
        if (hl > 0)
            CHECK(f.head && json_equal(f.head, head));
        else
            CHECK(f.head == NULL);
        CHECK(f.body_len == bl);
        if (bl > 0) {
            CHECK(f.body && (uintptr_t)f.body % 64 == 0);
            CHECK(f.body && memcmp(f.body, payload + hl, bl) == 0);
        } else {
            CHECK(f.body == NULL);
        }
        gsb__frame_clear(&f);
        CHECK(f.head == NULL && f.body == NULL && f.fd == -1);
        free(payload);
        free(txt);
        json_decref(head);
    }

    static const char *bad_heads[] = {
        "[1,2]", "42", "\"str\"", "null", "{", "{\"a\":1}x", "{\"a\":1,\"a\":2}", "",
        "{\"a\":\"\\u0000\"}", "{\"a\":1e99999}", "{'a':1}", "{\"a\":123456789012345678901234}",
    };
    for (size_t i = 0; i < sizeof bad_heads / sizeof bad_heads[0]; i++) {
        size_t hl = strlen(bad_heads[i]);
        uint8_t buf[64] = {0};
        memcpy(buf, bad_heads[i], hl);
        gsb__frame_hdr h = {1, GSB__F_REQUEST, 1, hl + 3, (uint32_t)hl, 0};
        gsb__frame f;
        int rc = gsb__frame_parse(&h, buf, &f);
        if (hl == 0) { /* no head at all: fine, the body holds the bytes */
            CHECK_OK(rc);
        } else {
            CHECK(rc == GSB_EINVAL && strstr(gsb_errmsg(), "head"));
            CHECK(f.head == NULL && f.body == NULL && f.fd == -1);
        }
        gsb__frame_clear(&f);
    }
    /* a raw NUL inside the head text */
    const char nul_head[] = "{\"a\":\"x\0y\"}";
    gsb__frame_hdr h = {1, GSB__F_REQUEST, 1, sizeof nul_head - 1, sizeof nul_head - 1, 0};
    gsb__frame f;
    CHECK_ERR(gsb__frame_parse(&h, (const uint8_t *)nul_head, &f), GSB_EINVAL, "JSON");
    /* the header limits are checked again (a hand-made header) */
    gsb__frame_hdr bad = {1, GSB__F_REQUEST, 1, 5, 6, 0};
    CHECK_ERR(gsb__frame_parse(&bad, (const uint8_t *)"{}{}{}", &f), GSB_EINVAL, "head_len");
    gsb__frame_hdr big = {1, GSB__F_REQUEST, 1, GSB__WIRE_MAX_INLINE + 3, 2, 0};
    CHECK_ERR(gsb__frame_parse(&big, (const uint8_t *)"{}", &f), GSB_EINVAL, "inline");
    gsb__frame_hdr nopay = {1, GSB__F_REQUEST, 1, 4, 0, 0};
    CHECK_ERR(gsb__frame_parse(&nopay, NULL, &f), GSB_EINVAL, "payload");
    gsb__frame_hdr empty = {1, GSB__F_CANCEL, 9, 0, 0, 0};
    CHECK_OK(gsb__frame_parse(&empty, NULL, &f));
    CHECK(f.head == NULL && f.body == NULL && f.body_len == 0 && f.hdr.req_id == 9);
    gsb__frame_clear(&f);
}

/* ---- array descriptors ----------------------------------------------------------- */

static int parse_text(const char *txt, gsb__wire_array *a)
{
    json_error_t e;
    json_t *j = json_loads(txt, JSON_DECODE_ANY, &e);
    if (!j) {
        fprintf(stderr, "test JSON does not parse: %s\n", txt);
        return -1;
    }
    int rc = gsb__wire_array_parse(j, a);
    json_decref(j);
    return rc;
}

static void test_array_parse_ok(void)
{
    gsb__wire_array a;
    CHECK_OK(parse_text("{\"dtype\":\"float32\",\"shape\":[1000,20],\"order\":\"C\","
                        "\"at\":\"inline\",\"offset\":0}", &a));
    CHECK(a.at == GSB__AT_INLINE && a.dtype == GSB_F32 && a.ndim == 2 && a.shape[0] == 1000 &&
          a.shape[1] == 20 && !a.fortran && a.offset == 0 && a.nbytes == 80000);
    CHECK_OK(parse_text("{\"dtype\":\"float64\",\"shape\":[3,5],\"order\":\"F\","
                        "\"at\":\"shm\",\"offset\":128,\"segment\":7}", &a));
    CHECK(a.at == GSB__AT_SHM && a.dtype == GSB_F64 && a.fortran && a.offset == 128 &&
          a.segment == 7 && a.nbytes == 120);
    CHECK_OK(parse_text("{\"dtype\":\"int64\",\"shape\":[],\"at\":\"chunks\"}", &a));
    CHECK(a.at == GSB__AT_CHUNKS && a.dtype == GSB_I64 && a.ndim == 0 && a.nbytes == 8);
    CHECK_OK(parse_text("{\"dtype\":\"int32\",\"shape\":[0],\"at\":\"data\",\"handle\":3,"
                        "\"extra\":\"ignored\"}", &a));
    CHECK(a.at == GSB__AT_DATA && a.dtype == GSB_I32 && a.handle == 3 && a.nbytes == 0);
    CHECK_OK(parse_text("{\"dtype\":\"uint8\",\"shape\":[12345],\"at\":\"inline\","
                        "\"offset\":640}", &a));
    CHECK(a.dtype == GSB__WIRE_U8 && a.nbytes == 12345 && a.offset == 640);
    /* [0, 2^50]: empty, allowed */
    CHECK_OK(parse_text("{\"dtype\":\"float64\",\"shape\":[0,1125899906842624],"
                        "\"at\":\"chunks\"}", &a));
    CHECK(a.nbytes == 0);
    /* the largest allowed: 2^62 - 8 bytes */
    CHECK_OK(parse_text("{\"dtype\":\"float64\",\"shape\":[576460752303423487],"
                        "\"at\":\"chunks\"}", &a));
    CHECK(a.nbytes == ((uint64_t)1 << 62) - 8);
    CHECK_OK(parse_text("null", &a));
    CHECK(a.at == GSB__AT_NONE);
    CHECK_OK(gsb__wire_array_parse(NULL, &a));
    CHECK(a.at == GSB__AT_NONE);

    /* round trip through JSON */
    testing_seed(3);
    for (int it = 0; it < 500; it++) {
        static const int dts[] = {GSB_F32, GSB_F64, GSB_I32, GSB_I64, GSB__WIRE_U8};
        gsb__wire_array w;
        memset(&w, 0, sizeof w);
        w.at = (gsb__at)rnd_int(1, 4);
        w.dtype = dts[rnd_int(0, 4)];
        w.ndim = (int)rnd_int(0, 2);
        uint64_t n = gsb__wire_itemsize(w.dtype);
        for (int k = 0; k < w.ndim; k++) {
            w.shape[k] = rnd_int(0, 100000);
            n *= (uint64_t)w.shape[k];
        }
        w.nbytes = n;
        w.fortran = (int)rnd_int(0, 1);
        if (w.at == GSB__AT_INLINE || w.at == GSB__AT_SHM)
            w.offset = (uint64_t)rnd_int(0, 1 << 30) * 64;
        if (w.at == GSB__AT_SHM)
            w.segment = (uint64_t)rnd_int(0, 1000);
        if (w.at == GSB__AT_DATA)
            w.handle = (uint64_t)rnd_int(1, 1 << 30);
        json_t *j = gsb__wire_array_json(&w);
        CHECK(j != NULL);
        gsb__wire_array b;
        CHECK_OK(gsb__wire_array_parse(j, &b));
        CHECK(b.at == w.at && b.dtype == w.dtype && b.ndim == w.ndim &&
              b.shape[0] == w.shape[0] && b.shape[1] == w.shape[1] && b.fortran == w.fortran &&
              b.offset == w.offset && b.segment == w.segment && b.handle == w.handle &&
              b.nbytes == w.nbytes);
        json_decref(j);
    }
    gsb__wire_array none;
    memset(&none, 0, sizeof none);
    json_t *j = gsb__wire_array_json(&none);
    CHECK(json_is_null(j));
    json_decref(j);
    gsb__wire_array bad = {GSB__AT_INLINE, 55, 1, {1, 0}, 0, 0, 0, 0, 4};
    CHECK(gsb__wire_array_json(&bad) == NULL);
    CHECK(gsb__wire_itemsize(GSB_F32) == 4 && gsb__wire_itemsize(GSB__WIRE_U8) == 1 &&
          gsb__wire_itemsize(0) == 0 && gsb__wire_itemsize(5) == 0);
}

static void test_array_parse_rejects(void)
{
    static const struct {
        const char *json, *msg;
    } cases[] = {
        {"{\"dtype\":\"float16\",\"shape\":[1],\"at\":\"chunks\"}", "unknown dtype"},
        {"{\"dtype\":\"\",\"shape\":[1],\"at\":\"chunks\"}", "unknown dtype"},
        {"{\"dtype\":4,\"shape\":[1],\"at\":\"chunks\"}", "\"dtype\" must be a string"},
        {"{\"shape\":[1],\"at\":\"chunks\"}", "missing \"dtype\""},
        {"{\"dtype\":\"float32\",\"at\":\"chunks\"}", "missing \"shape\""},
        {"{\"dtype\":\"float32\",\"shape\":[1]}", "missing \"at\""},
        {"{\"dtype\":\"float32\",\"shape\":[1,2,3],\"at\":\"chunks\"}", "3 dimensions"},
        {"{\"dtype\":\"float32\",\"shape\":[-1],\"at\":\"chunks\"}", "negative"},
        {"{\"dtype\":\"float32\",\"shape\":[4,-3],\"at\":\"chunks\"}", "negative"},
        {"{\"dtype\":\"float32\",\"shape\":[1.5],\"at\":\"chunks\"}", "shape[0] must be"},
        {"{\"dtype\":\"float32\",\"shape\":[\"3\"],\"at\":\"chunks\"}", "shape[0] must be"},
        {"{\"dtype\":\"float32\",\"shape\":[true],\"at\":\"chunks\"}", "shape[0] must be"},
        {"{\"dtype\":\"float32\",\"shape\":[2,null],\"at\":\"chunks\"}", "shape[1] must be"},
        {"{\"dtype\":\"float32\",\"shape\":3,\"at\":\"chunks\"}", "must be a list"},
        {"{\"dtype\":\"float32\",\"shape\":{},\"at\":\"chunks\"}", "must be a list"},
        /* overflow: 2^40 * 2^40 * 8, 2^31 * 2^31 * 8 = 2^65, 2^59 * 8 = 2^62 */
        {"{\"dtype\":\"float64\",\"shape\":[1099511627776,1099511627776],\"at\":\"chunks\"}",
         "too large"},
        {"{\"dtype\":\"float64\",\"shape\":[2147483648,2147483648],\"at\":\"chunks\"}",
         "too large"},
        {"{\"dtype\":\"float64\",\"shape\":[576460752303423488],\"at\":\"chunks\"}", "too large"},
        {"{\"dtype\":\"uint8\",\"shape\":[9223372036854775807],\"at\":\"chunks\"}", "too large"},
        /* an empty array whose other dimension alone is too large */
        {"{\"dtype\":\"float64\",\"shape\":[0,9223372036854775807],\"at\":\"chunks\"}",
         "too large"},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"order\":\"X\",\"at\":\"chunks\"}", "order"},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"order\":1,\"at\":\"chunks\"}", "order"},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"at\":\"disk\"}", "unknown \"at\""},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"at\":3}", "\"at\" must be a string"},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"at\":\"inline\"}", "missing \"offset\""},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"at\":\"inline\",\"offset\":3}", "multiple of 64"},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"at\":\"inline\",\"offset\":96}", "multiple of 64"},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"at\":\"inline\",\"offset\":-64}", "at least 0"},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"at\":\"inline\",\"offset\":\"0\"}",
         "must be an integer"},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"at\":\"inline\",\"offset\":64.0}",
         "must be an integer"},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"at\":\"shm\",\"offset\":0}", "missing \"segment\""},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"at\":\"shm\",\"segment\":1}", "missing \"offset\""},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"at\":\"shm\",\"segment\":1,\"offset\":65}",
         "multiple of 64"},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"at\":\"data\"}", "missing \"handle\""},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"at\":\"data\",\"handle\":0}", "at least 1"},
        {"{\"dtype\":\"float32\",\"shape\":[1],\"at\":\"data\",\"handle\":[1]}",
         "must be an integer"},
        {"[1,2]", "object or null"},
        {"\"float32\"", "object or null"},
        {"7", "object or null"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gsb__wire_array a;
        a.at = GSB__AT_CHUNKS;
        int rc = parse_text(cases[i].json, &a);
        if (rc != GSB_EINVAL || !strstr(gsb_errmsg(), cases[i].msg))
            fprintf(stderr, "case %zu %s: rc %d msg '%s'\n", i, cases[i].json, rc,
                    gsb_errmsg());
        CHECK(rc == GSB_EINVAL && strstr(gsb_errmsg(), cases[i].msg));
        CHECK(a.at == GSB__AT_NONE); /* cleared on failure */
    }
}

static void test_inline_bounds(void)
{
    gsb__frame f;
    memset(&f, 0, sizeof f);
    f.fd = -1;
    f.body = gsb__host_alloc(256);
    f.body_len = 256;
    for (int i = 0; i < 256; i++)
        f.body[i] = (uint8_t)i;
    gsb__wire_array a = {GSB__AT_INLINE, GSB_F64, 1, {8, 0}, 0, 0, 0, 0, 64};
    const void *p;
    for (uint64_t off = 0; off <= 192; off += 64) {
        a.offset = off;
        CHECK_OK(gsb__wire_inline_ptr(&f, &a, &p));
        CHECK(p == f.body + off);
    }
    a.offset = 256;
    CHECK_ERR(gsb__wire_inline_ptr(&f, &a, &p), GSB_EINVAL, "outside");
    CHECK(p == NULL);
    a.offset = 0x7fffffffffffffc0ull;
    CHECK_ERR(gsb__wire_inline_ptr(&f, &a, &p), GSB_EINVAL, "outside");
    a.offset = 0xffffffffffffffc0ull; /* offset + nbytes wraps around */
    CHECK_ERR(gsb__wire_inline_ptr(&f, &a, &p), GSB_EINVAL, "outside");
    a.offset = 32;
    CHECK_ERR(gsb__wire_inline_ptr(&f, &a, &p), GSB_EINVAL, "multiple of 64");
    /* one byte too many: 33 doubles from 0 */
    gsb__wire_array big = {GSB__AT_INLINE, GSB_F64, 1, {33, 0}, 0, 0, 0, 0, 264};
    CHECK_ERR(gsb__wire_inline_ptr(&f, &big, &p), GSB_EINVAL, "outside");
    big.shape[0] = 32;
    big.nbytes = 256;
    CHECK_OK(gsb__wire_inline_ptr(&f, &big, &p));
    /* a hand-made descriptor claiming fewer bytes than its shape */
    gsb__wire_array liar = {GSB__AT_INLINE, GSB_F64, 1, {1000, 0}, 0, 0, 0, 0, 8};
    CHECK_ERR(gsb__wire_inline_ptr(&f, &liar, &p), GSB_EINVAL, "nbytes");
    gsb__wire_array ch = {GSB__AT_CHUNKS, GSB_F64, 1, {1, 0}, 0, 0, 0, 0, 8};
    CHECK_ERR(gsb__wire_inline_ptr(&f, &ch, &p), GSB_EINVAL, "not in the frame");
    /* empty arrays: at the end is fine; no inline section at all is fine */
    gsb__wire_array e = {GSB__AT_INLINE, GSB_F32, 2, {0, 5}, 0, 256, 0, 0, 0};
    CHECK_OK(gsb__wire_inline_ptr(&f, &e, &p));
    gsb__frame none;
    memset(&none, 0, sizeof none);
    none.fd = -1;
    e.offset = 0;
    CHECK_OK(gsb__wire_inline_ptr(&none, &e, &p));
    CHECK(p != NULL && (uintptr_t)p % 64 == 0);
    e.offset = 64;
    CHECK_ERR(gsb__wire_inline_ptr(&none, &e, &p), GSB_EINVAL, "outside");
    gsb__wire_array one = {GSB__AT_INLINE, GSB_F32, 0, {0, 0}, 0, 0, 0, 0, 4};
    CHECK_ERR(gsb__wire_inline_ptr(&none, &one, &p), GSB_EINVAL, "outside");
    gsb__frame_clear(&f);
}

static void test_as_array(void)
{
    double buf[6];
    gsb__wire_array c = {GSB__AT_INLINE, GSB_F64, 2, {2, 3}, 0, 0, 0, 0, 48};
    gsb_array v = gsb__wire_as_array(&c, buf);
    CHECK(v.data == buf && v.dtype == GSB_F64 && v.ndim == 2 && v.shape[0] == 2 &&
          v.shape[1] == 3 && v.strides[0] == 0 && v.strides[1] == 0);
    gsb__wire_array f = c;
    f.fortran = 1;
    v = gsb__wire_as_array(&f, buf);
    CHECK(v.strides[0] == 8 && v.strides[1] == 16);
    gsb__wire_array one = {GSB__AT_INLINE, GSB_I32, 1, {6, 0}, 1, 0, 0, 0, 24};
    v = gsb__wire_as_array(&one, buf);
    CHECK(v.ndim == 1 && v.shape[0] == 6 && v.strides[0] == 0 && v.strides[1] == 0);
}

/* ---- building messages ---------------------------------------------------------- */

/* The inline section a receiver would get: the parts concatenated. */
static gsb__frame frame_of(const gsb__outmsg *m)
{
    gsb__frame f;
    memset(&f, 0, sizeof f);
    f.fd = -1;
    f.body_len = (size_t)m->inline_len;
    f.body = gsb__host_alloc(f.body_len); /* released by gsb__frame_clear */
    size_t off = 0;
    for (int i = 0; i < m->n_inline; i++) {
        memcpy(f.body + off, m->parts[i].iov_base, m->parts[i].iov_len);
        off += m->parts[i].iov_len;
    }
    return f;
}

static double elem_at(const gsb_array *v, int64_t i, int64_t j)
{
    int64_t isz = (int64_t)gsb_dtype_size(v->dtype);
    int64_t s0 = v->strides[0], s1 = v->strides[1];
    if (s0 == 0 && s1 == 0) {
        s0 = v->ndim == 2 ? v->shape[1] * isz : isz;
        s1 = isz;
    }
    const char *p = (const char *)v->data + i * s0 + (v->ndim == 2 ? j * s1 : 0);
    switch (v->dtype) {
    case GSB_F32: return *(const float *)p;
    case GSB_F64: return *(const double *)p;
    case GSB_I32: return *(const int32_t *)p;
    case GSB_I64: return (double)*(const int64_t *)p;
    }
    return NAN;
}

/* every element of the received view equals the original's */
static int same_elems(const gsb_array *got, const gsb_array *want)
{
    if (got->ndim != want->ndim || got->dtype != want->dtype)
        return 0;
    int64_t rows = want->ndim >= 1 ? want->shape[0] : 1, cols = want->ndim == 2 ? want->shape[1] : 1;
    for (int k = 0; k < want->ndim; k++)
        if (got->shape[k] != want->shape[k])
            return 0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            if (elem_at(got, i, j) != elem_at(want, i, j))
                return 0;
    return 1;
}

static void test_outmsg_layouts(void)
{
    testing_seed(4);
    double x[7 * 5];
    testing_fill_normal(x, 35);
    float xf[7 * 5];
    testing_fill_normal_f(xf, 35);
    int32_t xi[12];
    for (int i = 0; i < 12; i++)
        xi[i] = (int32_t)rnd_int(-1000, 1000);
    int64_t scalar = -42;
    gsb_array ins[9];
    ins[0] = gsb_array_2d(x, GSB_F64, 7, 5);                                 /* C */
    ins[1] = (gsb_array){xf, GSB_F32, 2, {5, 7}, {4, 20}};                   /* F */
    ins[2] = (gsb_array){x + 1, GSB_F64, 2, {7, 2}, {40, 16}};               /* strided */
    ins[3] = (gsb_array){x + 30, GSB_F64, 2, {7, 5}, {-40, 8}};              /* rows reversed */
    ins[4] = (gsb_array){xi + 11, GSB_I32, 1, {6, 0}, {-8, 0}};              /* 1-D, step -2 */
    ins[5] = (gsb_array){&scalar, GSB_I64, 0, {0, 0}, {0, 0}};               /* scalar */
    ins[6] = (gsb_array){x, GSB_F64, 2, {0, 5}, {0, 0}};                     /* empty */
    ins[7] = (gsb_array){xf, GSB_F32, 2, {5, 7}, {4, 0}};                    /* broadcast */
    ins[8] = (gsb_array){x, GSB_F64, 2, {1, 5}, {999, 8}};                   /* 1 row */
    gsb__outmsg m;
    gsb__outmsg_init(&m, 1 << 20);
    for (int i = 0; i < 9; i++)
        CHECK_OK(gsb__outmsg_add(&m, &ins[i]));
    CHECK_OK(gsb__outmsg_add(&m, NULL));
    gsb_array nul = {NULL, GSB_F64, 0, {0, 0}, {0, 0}};
    CHECK_OK(gsb__outmsg_add(&m, &nul));
    static const char blob[] = "model blob bytes";
    CHECK_OK(gsb__outmsg_add_bytes(&m, blob, sizeof blob));
    gsb__wire_array shm = {GSB__AT_SHM, GSB_F32, 2, {10, 3}, 1, 4096, 2, 0, 120};
    gsb__wire_array dat = {GSB__AT_DATA, GSB_F64, 1, {9, 0}, 0, 0, 0, 17, 72};
    CHECK_OK(gsb__outmsg_add_placed(&m, &shm));
    CHECK_OK(gsb__outmsg_add_placed(&m, &dat));
    CHECK_OK(gsb__outmsg_add_placed(&m, NULL));
    CHECK(json_array_size(m.arrays) == 15);
    CHECK(m.n_chunk == 0 && m.chunk_len == 0 && m.inline_len <= m.max_inline);

    /* contiguous arrays are referenced, not copied */
    int found_c = 0, found_f = 0;
    for (int i = 0; i < m.n_inline; i++) {
        found_c |= m.parts[i].iov_base == (void *)x && m.parts[i].iov_len == sizeof x;
        found_f |= m.parts[i].iov_base == (void *)xf && m.parts[i].iov_len == sizeof xf;
    }
    CHECK(found_c && found_f);
    CHECK(m.n_owned == 4); /* strided, reversed, 1-D strided and broadcast: packed */

    gsb__frame f = frame_of(&m);
    for (int i = 0; i < 9; i++) {
        gsb__wire_array w;
        CHECK_OK(gsb__wire_array_parse(json_array_get(m.arrays, (size_t)i), &w));
        CHECK(w.at == GSB__AT_INLINE && w.offset % 64 == 0);
        const void *p;
        CHECK_OK(gsb__wire_inline_ptr(&f, &w, &p));
        gsb_array v = gsb__wire_as_array(&w, (void *)p);
        CHECK(same_elems(&v, &ins[i]));
        CHECK(w.fortran == (i == 1)); /* only the F-contiguous one travels as F */
    }
    CHECK(json_is_null(json_array_get(m.arrays, 9)) && json_is_null(json_array_get(m.arrays, 10)));
    gsb__wire_array w;
    const void *p;
    CHECK_OK(gsb__wire_array_parse(json_array_get(m.arrays, 11), &w));
    CHECK(w.dtype == GSB__WIRE_U8 && w.nbytes == sizeof blob);
    CHECK_OK(gsb__wire_inline_ptr(&f, &w, &p));
    CHECK(memcmp(p, blob, sizeof blob) == 0);
    CHECK_OK(gsb__wire_array_parse(json_array_get(m.arrays, 12), &w));
    CHECK(w.at == GSB__AT_SHM && w.segment == 2 && w.offset == 4096 && w.fortran);
    CHECK_OK(gsb__wire_array_parse(json_array_get(m.arrays, 13), &w));
    CHECK(w.at == GSB__AT_DATA && w.handle == 17 && w.nbytes == 72);
    CHECK(json_is_null(json_array_get(m.arrays, 14)));
    gsb__frame_clear(&f);

    /* rejections */
    gsb_array bad = gsb_array_2d(x, (gsb_dtype)9, 2, 2);
    CHECK_ERR(gsb__outmsg_add(&m, &bad), GSB_EINVAL, "dtype");
    bad = gsb_array_2d(x, GSB_F64, -1, 2);
    CHECK_ERR(gsb__outmsg_add(&m, &bad), GSB_EINVAL, "negative");
    bad = (gsb_array){x, GSB_F64, 3, {1, 1}, {0, 0}};
    CHECK_ERR(gsb__outmsg_add(&m, &bad), GSB_EINVAL, "ndim");
    bad = gsb_array_2d(NULL, GSB_F64, 2, 2);
    CHECK_ERR(gsb__outmsg_add(&m, &bad), GSB_EINVAL, "no data");
    bad = gsb_array_2d(x, GSB_F64, (int64_t)1 << 40, (int64_t)1 << 40);
    CHECK_ERR(gsb__outmsg_add(&m, &bad), GSB_EINVAL, "too large");
    bad = gsb_array_1d(x, GSB_F64, 3);
    bad.strides[1] = GSB_DATA_REF_STRIDE;
    CHECK_ERR(gsb__outmsg_add(&m, &bad), GSB_EINVAL, "data handle");
    CHECK_ERR(gsb__outmsg_add_bytes(&m, NULL, 5), GSB_EINVAL, "no data");
    gsb__wire_array pl = {GSB__AT_INLINE, GSB_F64, 1, {9, 0}, 0, 0, 0, 0, 72};
    CHECK_ERR(gsb__outmsg_add_placed(&m, &pl), GSB_EINVAL, "placed");
    pl.at = GSB__AT_SHM;
    pl.offset = 8;
    CHECK_ERR(gsb__outmsg_add_placed(&m, &pl), GSB_EINVAL, "multiple of 64");
    pl.at = GSB__AT_DATA;
    pl.handle = 0;
    CHECK_ERR(gsb__outmsg_add_placed(&m, &pl), GSB_EINVAL, "handle");
    CHECK(json_array_size(m.arrays) == 15); /* failures add nothing */
    gsb__outmsg_clear(&m);
    CHECK(m.arrays == NULL && m.parts == NULL && m.n_inline == 0 && m.max_inline == 1 << 20);
    /* reusable after clear */
    CHECK_OK(gsb__outmsg_add(&m, &ins[0]));
    CHECK(json_array_size(m.arrays) == 1 && m.inline_len == sizeof x);
    gsb__outmsg_clear(&m);
}

static void test_outmsg_inline_vs_chunks(void)
{
    static double a[100], b[20], c[300], d[3];
    gsb_array A = gsb_array_1d(a, GSB_F64, 100), B = gsb_array_1d(b, GSB_F64, 20),
              C = gsb_array_1d(c, GSB_F64, 300), D = gsb_array_1d(d, GSB_F64, 3);
    gsb__outmsg m;
    gsb__outmsg_init(&m, 1200); /* A (800) fits; B at 832 needs 160: 992; C not; D fits */
    CHECK_OK(gsb__outmsg_add(&m, &A));
    CHECK_OK(gsb__outmsg_add(&m, &B));
    CHECK_OK(gsb__outmsg_add(&m, &C));
    CHECK_OK(gsb__outmsg_add(&m, &D));
    gsb__wire_array w[4];
    for (int i = 0; i < 4; i++)
        CHECK_OK(gsb__wire_array_parse(json_array_get(m.arrays, (size_t)i), &w[i]));
    CHECK(w[0].at == GSB__AT_INLINE && w[0].offset == 0);
    CHECK(w[1].at == GSB__AT_INLINE && w[1].offset == 832);
    CHECK(w[2].at == GSB__AT_CHUNKS);
    CHECK(w[3].at == GSB__AT_INLINE && w[3].offset == 1024);
    CHECK(m.inline_len == 1048 && m.chunk_len == 2400);
    /* inline parts (with their padding) first, then the chunk part */
    CHECK(m.n_inline == 5 && m.n_chunk == 1);
    CHECK(m.parts[0].iov_base == (void *)a && m.parts[1].iov_len == 32 &&
          m.parts[2].iov_base == (void *)b && m.parts[3].iov_len == 32 &&
          m.parts[4].iov_base == (void *)d && m.parts[5].iov_base == (void *)c);
    gsb__outmsg_clear(&m);
    /* max_inline 0: everything but empty arrays goes as chunks */
    gsb__outmsg_init(&m, 0);
    CHECK_OK(gsb__outmsg_add(&m, &A));
    gsb_array E = gsb_array_2d(a, GSB_F64, 3, 0);
    CHECK_OK(gsb__outmsg_add(&m, &E));
    CHECK_OK(gsb__wire_array_parse(json_array_get(m.arrays, 0), &w[0]));
    CHECK_OK(gsb__wire_array_parse(json_array_get(m.arrays, 1), &w[1]));
    CHECK(w[0].at == GSB__AT_CHUNKS && w[1].at == GSB__AT_INLINE && w[1].offset == 0);
    CHECK(m.inline_len == 0 && m.chunk_len == 800);
    gsb__outmsg_clear(&m);
    /* a max_inline above the protocol's limit is capped at it */
    gsb__outmsg_init(&m, UINT64_MAX);
    gsb_array huge = gsb_array_1d(a, GSB_F64, ((int64_t)64 << 20) / 8 + 1);
    CHECK_OK(gsb__outmsg_add(&m, &huge));
    CHECK_OK(gsb__wire_array_parse(json_array_get(m.arrays, 0), &w[0]));
    CHECK(w[0].at == GSB__AT_CHUNKS);
    gsb__outmsg_clear(&m);
}

/* ---- send / receive -------------------------------------------------------------- */

static void pair(int sv[2])
{
    int r = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
    CHECK(r == 0);
}

typedef struct {
    int sock;
    uint16_t type;
    uint64_t req_id;
    json_t *head;
    const char *key;
    const gsb__outmsg *msg;
    int fd;
    int rc;
    char err[256];
} send_job;

static void *send_thread(void *arg)
{
    send_job *j = arg;
    j->rc = gsb__wire_send(j->sock, j->type, j->req_id, j->head, j->key, j->msg, j->fd);
    snprintf(j->err, sizeof j->err, "%s", gsb_errmsg());
    return NULL;
}

static void test_send_recv_inline(void)
{
    int sv[2];
    pair(sv);
    testing_seed(5);
    float x[40 * 3];
    testing_fill_normal_f(x, 120);
    int64_t y[40];
    for (int i = 0; i < 40; i++)
        y[i] = rnd_int(-5, 5);
    gsb_array X = gsb_array_2d(x, GSB_F32, 40, 3), Y = gsb_array_1d(y, GSB_I64, 40);
    gsb_array Xs = {x + 2, GSB_F32, 1, {40, 0}, {12, 0}}; /* a column: packed */
    gsb__outmsg m;
    gsb__outmsg_init(&m, 1 << 20);
    CHECK_OK(gsb__outmsg_add(&m, &X));
    CHECK_OK(gsb__outmsg_add(&m, NULL));
    CHECK_OK(gsb__outmsg_add(&m, &Y));
    CHECK_OK(gsb__outmsg_add(&m, &Xs));
    json_t *head = json_pack("{s:s, s:i, s:s}", "op", "model.call", "model", 3, "method", "fit");
    CHECK_OK(gsb__wire_send(sv[0], GSB__F_REQUEST, 77, head, "inputs", &m, -1));
    /* the list was stored in the caller's head */
    CHECK(json_object_get(head, "inputs") == m.arrays);
    gsb__frame f;
    CHECK_OK(gsb__wire_recv(sv[1], &f, 1 << 20, 1000));
    CHECK(f.hdr.type == GSB__F_REQUEST && f.hdr.req_id == 77 && f.fd == -1);
    CHECK(f.head && json_equal(f.head, head));
    CHECK(f.body_len == m.inline_len && (uintptr_t)f.body % 64 == 0);
    const json_t *inputs = json_object_get(f.head, "inputs");
    const gsb_array *want[4] = {&X, NULL, &Y, &Xs};
    for (int i = 0; i < 4; i++) {
        gsb__wire_array w;
        CHECK_OK(gsb__wire_array_parse(json_array_get(inputs, (size_t)i), &w));
        if (!want[i]) {
            CHECK(w.at == GSB__AT_NONE);
            continue;
        }
        const void *p;
        CHECK_OK(gsb__wire_inline_ptr(&f, &w, &p));
        gsb_array v = gsb__wire_as_array(&w, (void *)p);
        CHECK(same_elems(&v, want[i]));
    }
    gsb__frame_clear(&f);

    /* frames without head or payload; a head without arrays */
    CHECK_OK(gsb__wire_send_empty(sv[0], GSB__F_CANCEL, 77));
    json_t *h2 = json_pack("{s:s}", "op", "ping");
    CHECK_OK(gsb__wire_send(sv[0], GSB__F_REQUEST, 78, h2, NULL, NULL, -1));
    /* msg without head: the function makes one holding "arrays" */
    CHECK_OK(gsb__wire_send(sv[0], GSB__F_REPLY, 79, NULL, NULL, &m, -1));
    CHECK_OK(gsb__wire_recv(sv[1], &f, 1 << 20, -1));
    CHECK(f.hdr.type == GSB__F_CANCEL && f.hdr.req_id == 77 && !f.head && !f.body);
    gsb__frame_clear(&f);
    CHECK_OK(gsb__wire_recv(sv[1], &f, 1 << 20, -1));
    CHECK(f.hdr.req_id == 78 && json_equal(f.head, h2) && f.body == NULL);
    gsb__frame_clear(&f);
    CHECK_OK(gsb__wire_recv(sv[1], &f, 1 << 20, -1));
    CHECK(f.hdr.req_id == 79 && json_array_size(json_object_get(f.head, "arrays")) == 4);
    gsb__frame_clear(&f);
    /* bad frames are not sent */
    CHECK_ERR(gsb__wire_send_empty(sv[0], 42, 1), GSB_EINVAL, "unknown frame type");
    json_t *notobj = json_array();
    CHECK_ERR(gsb__wire_send(sv[0], GSB__F_REPLY, 1, notobj, NULL, NULL, -1), GSB_EINTERNAL,
              "object");
    json_decref(notobj);
    CHECK_ERR(gsb__wire_send(sv[0], GSB__F_CANCEL, 1, h2, NULL, NULL, -1), GSB_EINVAL,
              "CANCEL");
    /* a head over the limit */
    char *longs = malloc(GSB__WIRE_MAX_HEAD + 10);
    memset(longs, 'a', GSB__WIRE_MAX_HEAD + 9);
    longs[GSB__WIRE_MAX_HEAD + 9] = '\0';
    json_t *h3 = json_pack("{s:s}", "name", longs);
    CHECK_ERR(gsb__wire_send(sv[0], GSB__F_REQUEST, 1, h3, NULL, NULL, -1), GSB_EINVAL,
              "exceeds the limit");
    json_decref(h3);
    free(longs);
    /* nothing of those reached the peer */
    CHECK_ERR(gsb__wire_recv(sv[1], &f, 1 << 20, 0), GSB_ECANCELLED, "timed out");
    json_decref(h2);
    json_decref(head);
    gsb__outmsg_clear(&m);
    close(sv[0]);
    close(sv[1]);
}

static void test_send_recv_chunks(void)
{
    int sv[2];
    pair(sv);
    testing_seed(6);
    /* ~20 MiB F-ordered, a 3 MiB int32 and a small one, max_inline 1 MiB: the
     * small goes inline, the two large ones as chunks that cross their
     * boundary (8 MiB frames) */
    int64_t rows = 655360, cols = 4; /* 20 MiB of float64 */
    double *big = malloc((size_t)(rows * cols) * sizeof *big);
    for (int64_t i = 0; i < rows * cols; i++)
        big[i] = (double)i * 0.5 - 7;
    int64_t n2 = 3 * 262144 + 5;
    int32_t *mid = malloc((size_t)n2 * sizeof *mid);
    for (int64_t i = 0; i < n2; i++)
        mid[i] = (int32_t)(i * 2654435761u);
    float small[10];
    testing_fill_normal_f(small, 10);
    gsb_array Big = {big, GSB_F64, 2, {rows, cols}, {8, 8 * rows}};
    gsb_array Mid = gsb_array_1d(mid, GSB_I32, n2), Small = gsb_array_2d(small, GSB_F32, 2, 5);
    gsb__outmsg m;
    gsb__outmsg_init(&m, 1 << 20);
    CHECK_OK(gsb__outmsg_add(&m, &Big));
    CHECK_OK(gsb__outmsg_add(&m, &Small));
    CHECK_OK(gsb__outmsg_add(&m, &Mid));
    CHECK(m.n_chunk == 2 && m.chunk_len == (uint64_t)(rows * cols * 8 + n2 * 4));
    CHECK(m.n_owned == 0);
    json_t *head = json_pack("{s:b}", "fitted", 1);
    send_job job = {sv[0], GSB__F_REPLY, 5, head, "arrays", &m, -1, -1, ""};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, send_thread, &job) == 0);

    gsb__frame f;
    CHECK_OK(gsb__wire_recv(sv[1], &f, 1 << 20, 5000));
    const json_t *arrs = json_object_get(f.head, "arrays");
    gsb__wire_array w[3];
    for (int i = 0; i < 3; i++)
        CHECK_OK(gsb__wire_array_parse(json_array_get(arrs, (size_t)i), &w[i]));
    CHECK(w[0].at == GSB__AT_CHUNKS && w[0].fortran && w[1].at == GSB__AT_INLINE &&
          w[2].at == GSB__AT_CHUNKS);
    const void *p;
    CHECK_OK(gsb__wire_inline_ptr(&f, &w[1], &p));
    CHECK(memcmp(p, small, sizeof small) == 0);
    void *b0 = malloc(w[0].nbytes), *b2 = malloc(w[2].nbytes);
    struct iovec dst[2] = {{b0, w[0].nbytes}, {b2, w[2].nbytes}};
    CHECK_OK(gsb__wire_recv_chunks(sv[1], 5, dst, 2));
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(job.rc == GSB_OK);
    CHECK(memcmp(b0, big, w[0].nbytes) == 0);
    CHECK(memcmp(b2, mid, w[2].nbytes) == 0);
    gsb_array v = gsb__wire_as_array(&w[0], b0);
    CHECK(elem_at(&v, rows - 1, 2) == elem_at(&Big, rows - 1, 2));
    gsb__frame_clear(&f);
    /* the stream is at a frame boundary again */
    CHECK_ERR(gsb__wire_recv(sv[1], &f, 1 << 20, 0), GSB_ECANCELLED, "timed out");
    free(b0);
    free(b2);
    json_decref(head);
    gsb__outmsg_clear(&m);
    free(big);
    free(mid);
    close(sv[0]);
    close(sv[1]);
}

static void send_raw(int s, const void *p, size_t n)
{
    ssize_t w = send(s, p, n, MSG_NOSIGNAL);
    CHECK(w == (ssize_t)n);
}

static void send_hdr(int s, uint16_t type, uint64_t req, uint64_t len, uint32_t hl)
{
    gsb__frame_hdr h = {1, type, req, len, hl, 0};
    uint8_t b[32];
    gsb__hdr_encode(&h, b);
    send_raw(s, b, 32);
}

static void test_recv_chunks_rejects(void)
{
    uint8_t buf[100], pay[100];
    memset(pay, 0xab, sizeof pay);
    struct iovec dst[2] = {{buf, 60}, {buf + 60, 40}};
    static const struct {
        uint16_t type;
        uint64_t req, len;
        const char *msg;
    } cases[] = {
        {GSB__F_REPLY, 9, 0, "expected a CHUNK"},
        {GSB__F_CHUNK, 8, 10, "of request 8"},
        {GSB__F_CHUNK, 9, 101, "100 bytes of chunked arrays remain"},
        {GSB__F_CHUNK, 9, 0, "CHUNK of 0 bytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int sv[2];
        pair(sv);
        send_hdr(sv[0], cases[i].type, cases[i].req, cases[i].len, 0);
        CHECK_ERR(gsb__wire_recv_chunks(sv[1], 9, dst, 2), GSB_EINVAL, cases[i].msg);
        close(sv[0]);
        close(sv[1]);
    }
    /* 30 + 70 bytes in two frames, the second one too long by 1 */
    int sv[2];
    pair(sv);
    send_hdr(sv[0], GSB__F_CHUNK, 9, 30, 0);
    send_raw(sv[0], pay, 30);
    send_hdr(sv[0], GSB__F_CHUNK, 9, 71, 0);
    CHECK_ERR(gsb__wire_recv_chunks(sv[1], 9, dst, 2), GSB_EINVAL, "70 bytes");
    close(sv[0]);
    close(sv[1]);
    /* the right frames, split 30 + 70 across the two buffers */
    pair(sv);
    for (int i = 0; i < 100; i++)
        pay[i] = (uint8_t)(i * 7);
    send_hdr(sv[0], GSB__F_CHUNK, 9, 30, 0);
    send_raw(sv[0], pay, 30);
    send_hdr(sv[0], GSB__F_CHUNK, 9, 70, 0);
    send_raw(sv[0], pay + 30, 70);
    memset(buf, 0, sizeof buf);
    CHECK_OK(gsb__wire_recv_chunks(sv[1], 9, dst, 2));
    CHECK(memcmp(buf, pay, 100) == 0);
    /* truncated payload, then closed */
    send_hdr(sv[0], GSB__F_CHUNK, 9, 50, 0);
    send_raw(sv[0], pay, 20);
    close(sv[0]);
    CHECK_ERR(gsb__wire_recv_chunks(sv[1], 9, dst, 2), GSB_EIO, "closed");
    close(sv[1]);
    /* nothing expected: returns at once, reads nothing */
    CHECK_OK(gsb__wire_recv_chunks(-1, 9, NULL, 0));
}

static void test_fd_passing(void)
{
    int before = count_open_fds();
    int sv[2];
    pair(sv);
    int mfd = memfd_create("gsb-test", MFD_CLOEXEC);
    CHECK(mfd >= 0);
    CHECK(ftruncate(mfd, 4096) == 0);
    CHECK(pwrite(mfd, "hello-shm", 9, 100) == 9);
    json_t *head = json_pack("{s:s, s:i, s:i}", "op", "shm.attach", "segment", 1, "size", 4096);
    CHECK_OK(gsb__wire_send(sv[0], GSB__F_REQUEST, 3, head, NULL, NULL, mfd));
    gsb__frame f;
    CHECK_OK(gsb__wire_recv(sv[1], &f, 1 << 20, 1000));
    CHECK(f.fd >= 0 && f.fd != mfd);
    CHECK(fcntl(f.fd, F_GETFD) & FD_CLOEXEC);
    char got[10] = {0};
    CHECK(pread(f.fd, got, 9, 100) == 9 && memcmp(got, "hello-shm", 9) == 0);
    /* same file: a write through one is seen through the other */
    CHECK(pwrite(f.fd, "X", 1, 0) == 1);
    char c = 0;
    CHECK(pread(mfd, &c, 1, 0) == 1 && c == 'X');
    gsb__frame_clear(&f);
    CHECK(f.fd == -1);

    /* two fds on one frame: refused, both closed */
    int fds[2] = {dup(mfd), dup(mfd)};
    gsb__frame_hdr h = {1, GSB__F_REQUEST, 4, 0, 0, 0};
    uint8_t hb[32];
    gsb__hdr_encode(&h, hb);
    struct iovec iov = {hb, 32};
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr a;
    } cm;
    memset(&cm, 0, sizeof cm);
    struct msghdr mh = {0};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cm.buf;
    mh.msg_controllen = sizeof cm.buf;
    struct cmsghdr *cmh = CMSG_FIRSTHDR(&mh);
    cmh->cmsg_level = SOL_SOCKET;
    cmh->cmsg_type = SCM_RIGHTS;
    cmh->cmsg_len = CMSG_LEN(2 * sizeof(int));
    memcpy(CMSG_DATA(cmh), fds, sizeof fds);
    CHECK(sendmsg(sv[0], &mh, 0) == 32);
    close(fds[0]);
    close(fds[1]);
    CHECK_ERR(gsb__wire_recv(sv[1], &f, 1 << 20, 1000), GSB_EINVAL, "more than one");
    CHECK(f.fd == -1);

    /* an fd on a frame that fails later (bad magic) is closed too */
    uint8_t junk[32];
    memset(junk, 'z', sizeof junk);
    {
        /* garbage with an fd */
        int sv2[2];
        pair(sv2);
        struct iovec jv = {junk, 32};
        mh.msg_iov = &jv;
        cmh->cmsg_len = CMSG_LEN(sizeof(int));
        mh.msg_controllen = CMSG_SPACE(sizeof(int));
        memcpy(CMSG_DATA(cmh), &mfd, sizeof mfd);
        CHECK(sendmsg(sv2[0], &mh, 0) == 32);
        CHECK_ERR(gsb__wire_recv(sv2[1], &f, 1 << 20, 1000), GSB_EINVAL, "magic");
        /* an fd on a frame whose peer closes mid-frame */
        gsb__frame_hdr h2 = {1, GSB__F_REQUEST, 4, 100, 10, 0};
        gsb__hdr_encode(&h2, hb);
        mh.msg_iov = &iov;
        CHECK(sendmsg(sv2[0], &mh, 0) == 32);
        close(sv2[0]);
        CHECK_ERR(gsb__wire_recv(sv2[1], &f, 1 << 20, 1000), GSB_EIO, "middle of a frame");
        close(sv2[1]);
    }
    /* after the refused frame, an fd on the next good one still arrives */
    CHECK_OK(gsb__wire_send(sv[0], GSB__F_REQUEST, 5, head, NULL, NULL, mfd));
    CHECK_OK(gsb__wire_recv(sv[1], &f, 1 << 20, 1000));
    CHECK(f.fd >= 0 && f.hdr.req_id == 5);
    gsb__frame_clear(&f);
    json_decref(head);
    close(mfd);
    close(sv[0]);
    close(sv[1]);
    CHECK(count_open_fds() == before); /* nothing leaked on any path */
}

static void test_recv_timeout_and_close(void)
{
    int sv[2];
    pair(sv);
    gsb__frame f;
    CHECK_ERR(gsb__wire_recv(sv[1], &f, 1 << 20, 50), GSB_ECANCELLED, "timed out");
    CHECK_ERR(gsb__wire_recv(sv[1], &f, 1 << 20, 0), GSB_ECANCELLED, "timed out");
    /* no bytes consumed by a timeout: a frame sent now arrives whole */
    CHECK_OK(gsb__wire_send_empty(sv[0], GSB__F_CANCEL, 12));
    CHECK_OK(gsb__wire_recv(sv[1], &f, 1 << 20, 50));
    CHECK(f.hdr.type == GSB__F_CANCEL && f.hdr.req_id == 12);
    /* the header arrives in two pieces */
    gsb__frame_hdr h = {1, GSB__F_PROGRESS, 13, 2, 2, 0};
    uint8_t hb[32];
    gsb__hdr_encode(&h, hb);
    send_raw(sv[0], hb, 10);
    send_raw(sv[0], hb + 10, 22);
    send_raw(sv[0], "{}", 2);
    CHECK_OK(gsb__wire_recv(sv[1], &f, 1 << 20, 50));
    CHECK(f.hdr.req_id == 13 && json_object_size(f.head) == 0);
    gsb__frame_clear(&f);
    /* the limit on the inline section is the caller's */
    json_t *head = json_object();
    gsb__outmsg m;
    gsb__outmsg_init(&m, 1 << 20);
    static uint8_t blob[2048];
    CHECK_OK(gsb__outmsg_add_bytes(&m, blob, sizeof blob));
    CHECK_OK(gsb__wire_send(sv[0], GSB__F_REPLY, 14, head, NULL, &m, -1));
    CHECK_ERR(gsb__wire_recv(sv[1], &f, 1024, 50), GSB_EINVAL, "exceeds this side's limit");
    gsb__outmsg_clear(&m);
    json_decref(head);
    close(sv[0]);
    close(sv[1]);

    /* peer closed: before a frame, in a header, in a head, in a body */
    static const size_t cut[] = {0, 5, 32 + 3, 32 + 7 + 10};
    static const char *msgs[] = {"connection closed", "middle", "middle", "middle"};
    for (int i = 0; i < 4; i++) {
        pair(sv);
        uint8_t frame[32 + 7 + 64];
        gsb__frame_hdr h2 = {1, GSB__F_REPLY, 1, 7 + 64, 7, 0};
        gsb__hdr_encode(&h2, frame);
        memcpy(frame + 32, "{\"a\":1}", 7);
        memset(frame + 39, 1, 64);
        if (cut[i])
            send_raw(sv[0], frame, cut[i]);
        close(sv[0]);
        int rc = gsb__wire_recv(sv[1], &f, 1 << 20, 1000);
        CHECK(rc == GSB_EIO && strstr(gsb_errmsg(), msgs[i]));
        if (i == 0)
            CHECK(strcmp(gsb_errmsg(), "connection closed") == 0);
        CHECK(f.head == NULL && f.body == NULL && f.fd == -1);
        close(sv[1]);
    }
    /* waiting forever still sees the close */
    pair(sv);
    close(sv[0]);
    CHECK_ERR(gsb__wire_recv(sv[1], &f, 1 << 20, -1), GSB_EIO, "connection closed");
    /* sending to a closed peer: an error, no SIGPIPE (which would kill us) */
    CHECK_ERR(gsb__wire_send_empty(sv[1], GSB__F_CANCEL, 1), GSB_EIO, "closed by the peer");
    close(sv[1]);
    /* bad head after a good header: refused, frame released */
    pair(sv);
    gsb__frame_hdr h3 = {1, GSB__F_REQUEST, 1, 4 + 64, 4, 0};
    uint8_t fr[32 + 4 + 64];
    gsb__hdr_encode(&h3, fr);
    memcpy(fr + 32, "{\"a\"", 4);
    memset(fr + 36, 0, 64);
    send_raw(sv[0], fr, sizeof fr);
    CHECK_ERR(gsb__wire_recv(sv[1], &f, 1 << 20, 100), GSB_EINVAL, "JSON");
    CHECK(f.head == NULL && f.body == NULL);
    /* the whole bad frame was consumed: the next one is read cleanly */
    CHECK_OK(gsb__wire_send_empty(sv[0], GSB__F_CANCEL, 2));
    CHECK_OK(gsb__wire_recv(sv[1], &f, 1 << 20, 100));
    CHECK(f.hdr.req_id == 2);
    /* garbage bytes */
    send_raw(sv[0], "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 33);
    CHECK_ERR(gsb__wire_recv(sv[1], &f, 1 << 20, 100), GSB_EINVAL, "magic");
    close(sv[0]);
    close(sv[1]);
    CHECK_ERR(gsb__wire_recv(sv[1], &f, 1 << 20, 10), GSB_EIO, "not an open socket");
}

/* More parts than one sendmsg/recvmsg takes (IOV_MAX): 1500 small arrays,
 * inline (3000 parts with padding) and as chunks (1500 destination buffers). */
static void test_many_parts(void)
{
    enum { N = 1500 };
    static double vals[N][3];
    for (int i = 0; i < N; i++)
        for (int k = 0; k < 3; k++)
            vals[i][k] = i * 10 + k;
    for (int chunked = 0; chunked < 2; chunked++) {
        int sv[2];
        pair(sv);
        gsb__outmsg m;
        gsb__outmsg_init(&m, chunked ? 0 : 1 << 20);
        for (int i = 0; i < N; i++) {
            gsb_array a = gsb_array_1d(vals[i], GSB_F64, 3);
            CHECK_OK(gsb__outmsg_add(&m, &a));
        }
        CHECK(chunked ? m.n_chunk == N : m.n_inline == 2 * N - 1);
        send_job job = {sv[0], GSB__F_REPLY, 11, NULL, "arrays", &m, -1, -1, ""};
        pthread_t th;
        CHECK(pthread_create(&th, NULL, send_thread, &job) == 0);
        gsb__frame f;
        CHECK_OK(gsb__wire_recv(sv[1], &f, 1 << 20, 5000));
        const json_t *list = json_object_get(f.head, "arrays");
        CHECK(json_array_size(list) == N);
        static double got[N][3];
        static struct iovec dst[N];
        memset(got, 0, sizeof got);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            gsb__wire_array w;
            bad |= gsb__wire_array_parse(json_array_get(list, (size_t)i), &w) != GSB_OK;
            if (chunked) {
                bad |= w.at != GSB__AT_CHUNKS;
                dst[i].iov_base = got[i];
                dst[i].iov_len = sizeof got[i];
            } else {
                const void *p;
                bad |= gsb__wire_inline_ptr(&f, &w, &p) != GSB_OK;
                if (!bad)
                    memcpy(got[i], p, sizeof got[i]);
            }
        }
        CHECK(!bad);
        if (chunked)
            CHECK_OK(gsb__wire_recv_chunks(sv[1], 11, dst, N));
        CHECK(pthread_join(th, NULL) == 0);
        CHECK(job.rc == GSB_OK);
        CHECK(memcmp(got, vals, sizeof vals) == 0);
        gsb__frame_clear(&f);
        gsb__outmsg_clear(&m);
        close(sv[0]);
        close(sv[1]);
    }
}

/* Signals without SA_RESTART interrupt poll, sendmsg and recvmsg (EINTR) or
 * cut them short (partial transfers): frames must still arrive whole. */
static volatile sig_atomic_t eintr_hits;
static void on_usr1(int sig)
{
    (void)sig;
    eintr_hits++;
}

typedef struct {
    int sock;
    double *buf;
    size_t n;
    int rc[4];
    double first, last;
} eintr_rx;

static void *eintr_receiver(void *arg)
{
    eintr_rx *x = arg;
    gsb__frame f;
    x->rc[0] = gsb__wire_recv(x->sock, &f, 1 << 20, 5000); /* waits in poll */
    gsb__frame_clear(&f);
    x->rc[1] = gsb__wire_recv(x->sock, &f, 1 << 20, -1); /* waits in recvmsg */
    if (x->rc[1] == GSB_OK) {
        struct iovec d = {x->buf, x->n * sizeof(double)};
        x->rc[2] = gsb__wire_recv_chunks(x->sock, f.hdr.req_id, &d, 1);
    }
    gsb__frame_clear(&f);
    return NULL;
}

typedef struct {
    pthread_t targets[2];
    volatile int stop;
} eintr_sig;

static void *eintr_signaller(void *arg)
{
    eintr_sig *s = arg;
    while (!s->stop) {
        pthread_kill(s->targets[0], SIGUSR1);
        pthread_kill(s->targets[1], SIGUSR1);
        usleep(200);
    }
    return NULL;
}

static void test_eintr(void)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = 0; /* no SA_RESTART: calls fail with EINTR */
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, &old) == 0);
    eintr_hits = 0;

    int sv[2];
    pair(sv);
    size_t n = (size_t)3 << 20; /* 24 MiB of float64: three CHUNK frames */
    double *src = malloc(n * sizeof *src), *dst = calloc(n, sizeof *dst);
    for (size_t i = 0; i < n; i++)
        src[i] = (double)i;
    eintr_rx rx = {sv[1], dst, n, {-1, -1, -1, -1}, 0, 0};
    pthread_t rth;
    CHECK(pthread_create(&rth, NULL, eintr_receiver, &rx) == 0);
    eintr_sig sg = {{rth, pthread_self()}, 0};
    pthread_t sth;
    CHECK(pthread_create(&sth, NULL, eintr_signaller, &sg) == 0);

    usleep(30000); /* the receiver sits in poll() meanwhile */
    CHECK_OK(gsb__wire_send_empty(sv[0], GSB__F_CANCEL, 1));
    usleep(30000); /* ... and then in recvmsg() */
    gsb__outmsg m;
    gsb__outmsg_init(&m, 1 << 20);
    gsb_array a = gsb_array_1d(src, GSB_F64, (int64_t)n);
    CHECK_OK(gsb__outmsg_add(&m, &a));
    json_t *head = json_object();
    /* this thread is signalled too, while sendmsg waits for room */
    CHECK_OK(gsb__wire_send(sv[0], GSB__F_REPLY, 2, head, "arrays", &m, -1));
    CHECK(pthread_join(rth, NULL) == 0);
    sg.stop = 1;
    CHECK(pthread_join(sth, NULL) == 0);
    CHECK(rx.rc[0] == GSB_OK && rx.rc[1] == GSB_OK && rx.rc[2] == GSB_OK);
    CHECK(memcmp(src, dst, n * sizeof *src) == 0);
    CHECK(eintr_hits > 10);
    json_decref(head);
    gsb__outmsg_clear(&m);
    free(src);
    free(dst);
    close(sv[0]);
    close(sv[1]);
    CHECK(sigaction(SIGUSR1, &old, NULL) == 0);
}

/* ---- URLs and sockets -------------------------------------------------------------- */

static void test_url_parse(void)
{
    gsb__sockaddr_url u;
    CHECK_OK(gsb__url_parse("tcp://127.0.0.1:19876", &u));
    CHECK(!u.is_unix && strcmp(u.host, "127.0.0.1") == 0 && u.port == 19876);
    CHECK(gsb__url_is_local(&u));
    CHECK_OK(gsb__url_parse("tcp://[::1]:0", &u));
    CHECK(strcmp(u.host, "::1") == 0 && u.port == 0 && gsb__url_is_local(&u));
    CHECK_OK(gsb__url_parse("tcp://[fe80::1%eth0]:80", &u));
    CHECK(strcmp(u.host, "fe80::1%eth0") == 0 && u.port == 80 && !gsb__url_is_local(&u));
    CHECK_OK(gsb__url_parse("TCP://LocalHost:65535?token_file=/x/y", &u));
    CHECK(strcmp(u.host, "LocalHost") == 0 && u.port == 65535 && gsb__url_is_local(&u));
    CHECK_OK(gsb__url_parse("tcp://gpu-box.example.com:443", &u));
    CHECK(strcmp(u.host, "gpu-box.example.com") == 0 && !gsb__url_is_local(&u));
    CHECK_OK(gsb__url_parse("tcp://0.0.0.0:1", &u));
    CHECK(!gsb__url_is_local(&u));
    CHECK_OK(gsb__url_parse("tcp://127.8.9.10:1", &u));
    CHECK(gsb__url_is_local(&u));
    CHECK_OK(gsb__url_parse("tcp://[::ffff:127.0.0.1]:1", &u));
    CHECK(gsb__url_is_local(&u));
    CHECK_OK(gsb__url_parse("tcp://[::]:1", &u));
    CHECK(!gsb__url_is_local(&u));
    CHECK_OK(gsb__url_parse("tcp://10.0.0.1:1", &u));
    CHECK(!gsb__url_is_local(&u));
    CHECK_OK(gsb__url_parse("unix:///run/gsb/gsbd.sock", &u));
    CHECK(u.is_unix && strcmp(u.path, "/run/gsb/gsbd.sock") == 0 && gsb__url_is_local(&u));
    CHECK_OK(gsb__url_parse("unix:rel/gsbd.sock?token_file=t", &u));
    CHECK(u.is_unix && strcmp(u.path, "rel/gsbd.sock") == 0);
    CHECK_OK(gsb__url_parse("unix:/abs.sock", &u));
    CHECK(u.is_unix && strcmp(u.path, "/abs.sock") == 0);

    static const struct {
        const char *url, *msg;
    } bad[] = {
        {"http://x:1", "unknown scheme"},
        {"", "unknown scheme"},
        {"127.0.0.1:19876", "unknown scheme"},
        {"tcp://", "missing port"},
        {"tcp://host", "missing port"},
        {"tcp://host:", "missing port"},
        {"tcp://:80", "missing host"},
        {"tcp://host:80x", "decimal"},
        {"tcp://host:-1", "decimal"},
        {"tcp://host:65536", "out of range"},
        {"tcp://host:123456", "out of range"},
        {"tcp://host:80/path", "decimal"},
        {"tcp://::1:80", "brackets"},
        {"tcp://[::1:80", "']'"},
        {"tcp://[::1]", "missing port"},
        {"tcp://[::1]80", "missing port"},
        {"tcp://[]:80", "IPv6"},
        {"tcp://[1.2.3.4]:80", "not an IPv6"},
        {"tcp://us er@host:80", "bad character"},
        {"unix://relative.sock", "absolute path"},
        {"unix://", "absolute path"},
        {"unix:", "missing socket path"},
        {"unix:?x", "missing socket path"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = gsb__url_parse(bad[i].url, &u);
        if (rc != GSB_EINVAL || !strstr(gsb_errmsg(), bad[i].msg))
            fprintf(stderr, "url '%s': rc %d '%s'\n", bad[i].url, rc, gsb_errmsg());
        CHECK(rc == GSB_EINVAL && strstr(gsb_errmsg(), bad[i].msg));
    }
    char longurl[400] = "unix:///";
    memset(longurl + 8, 'p', 120);
    CHECK_ERR(gsb__url_parse(longurl, &u), GSB_EINVAL, "at most 107");
    longurl[8 + 106] = '\0'; /* 107 bytes of path with the slash: the limit */
    CHECK_OK(gsb__url_parse(longurl, &u));
    CHECK(strlen(u.path) == 107);
    char longhost[400] = "tcp://";
    memset(longhost + 6, 'h', 300);
    strcpy(longhost + 306, ":1");
    CHECK_ERR(gsb__url_parse(longhost, &u), GSB_EINVAL, "too long");
    CHECK_ERR(gsb__url_parse(NULL, &u), GSB_EINVAL, "no URL");
}

static int accept_one(int lfd)
{
    int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    CHECK(c >= 0);
    return c;
}

/* one ping/reply over a connected pair */
static void exchange(int cfd, int sfd)
{
    json_t *h = json_pack("{s:s}", "op", "ping");
    CHECK_OK(gsb__wire_send(cfd, GSB__F_REQUEST, 1, h, NULL, NULL, -1));
    gsb__frame f;
    CHECK_OK(gsb__wire_recv(sfd, &f, 1 << 20, 2000));
    CHECK(f.head && json_equal(f.head, h));
    gsb__frame_clear(&f);
    json_t *r = json_object();
    CHECK_OK(gsb__wire_send(sfd, GSB__F_REPLY, 1, r, NULL, NULL, -1));
    CHECK_OK(gsb__wire_recv(cfd, &f, 1 << 20, 2000));
    CHECK(f.hdr.type == GSB__F_REPLY && f.hdr.req_id == 1);
    gsb__frame_clear(&f);
    json_decref(r);
    json_decref(h);
}

static void test_tcp(void)
{
    int lfd, cfd;
    char *bound = NULL;
    CHECK_OK(gsb__sock_listen("tcp://127.0.0.1:0", &lfd, &bound));
    CHECK(bound && strncmp(bound, "tcp://127.0.0.1:", 16) == 0 && atoi(bound + 16) > 0);
    CHECK(fcntl(lfd, F_GETFD) & FD_CLOEXEC);
    CHECK_OK(gsb__sock_connect(bound, &cfd));
    CHECK(fcntl(cfd, F_GETFD) & FD_CLOEXEC);
    int v = 0;
    socklen_t l = sizeof v;
    CHECK(getsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &v, &l) == 0 && v == 1);
    l = sizeof v;
    CHECK(getsockopt(cfd, SOL_SOCKET, SO_SNDBUF, &v, &l) == 0 && v >= 1 << 20);
    int sfd = accept_one(lfd);
    l = sizeof v;
    CHECK(getsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &v, &l) == 0 && v == 1); /* inherited */
    exchange(cfd, sfd);
    /* the port is taken now */
    int lfd2 = -1;
    CHECK_ERR(gsb__sock_listen(bound, &lfd2, NULL), GSB_EIO, "already in use");
    CHECK(lfd2 == -1);
    close(sfd);
    close(cfd);
    close(lfd);
    /* nobody listens there any more */
    CHECK_ERR(gsb__sock_connect(bound, &cfd), GSB_EIO, "is gsbd running? (connection refused)");
    CHECK(cfd == -1 && strstr(gsb_errmsg(), bound));
    free(bound);

    /* IPv6 loopback, where the host has it */
    if (gsb__sock_listen("tcp://[::1]:0", &lfd, &bound) == GSB_OK) {
        CHECK(strncmp(bound, "tcp://[::1]:", 12) == 0);
        CHECK_OK(gsb__sock_connect(bound, &cfd));
        sfd = accept_one(lfd);
        exchange(cfd, sfd);
        close(sfd);
        close(cfd);
        close(lfd);
        free(bound);
    } else {
        printf("     (no IPv6 loopback here: %s)\n", gsb_errmsg());
    }
    /* localhost resolves */
    CHECK_OK(gsb__sock_listen("tcp://localhost:0", &lfd, &bound));
    CHECK_OK(gsb__sock_connect(bound, &cfd));
    sfd = accept_one(lfd);
    exchange(cfd, sfd);
    close(sfd);
    close(cfd);
    close(lfd);
    free(bound);
    CHECK_ERR(gsb__sock_connect("tcp://no-such-host.invalid:1", &cfd), GSB_EIO,
              "cannot resolve host 'no-such-host.invalid'");
    CHECK_ERR(gsb__sock_connect("tcp://nohost", &cfd), GSB_EINVAL, "missing port");
    CHECK_ERR(gsb__sock_listen("tcp://192.0.2.1:0", &lfd, NULL), GSB_EIO,
              "no such local address");
}

static void test_unix(void)
{
    char dir[] = "/tmp/gsb-test-wire-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256], url[300];
    snprintf(path, sizeof path, "%s/gsbd.sock", dir);
    snprintf(url, sizeof url, "unix://%s", path);
    int before = count_open_fds();

    CHECK_ERR(gsb__sock_connect(url, &(int){0}), GSB_EIO, "is gsbd running?");
    CHECK(strstr(gsb_errmsg(), url) != NULL);

    int lfd, cfd;
    char *bound = NULL;
    CHECK_OK(gsb__sock_listen(url, &lfd, &bound));
    CHECK(bound && strcmp(bound, url) == 0);
    struct stat st;
    CHECK(stat(path, &st) == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0600);
    CHECK(fcntl(lfd, F_GETFD) & FD_CLOEXEC);
    CHECK_OK(gsb__sock_connect(url, &cfd));
    CHECK(fcntl(cfd, F_GETFD) & FD_CLOEXEC);
    int sfd = accept_one(lfd);
    exchange(cfd, sfd);
    /* a second server on the same path: refused, the first keeps its socket */
    int lfd2 = -1;
    CHECK_ERR(gsb__sock_listen(url, &lfd2, NULL), GSB_EIO, "already in use");
    CHECK(lfd2 == -1 && stat(path, &st) == 0);
    close(sfd);
    close(cfd);
    close(lfd); /* the file stays behind, as after a crash: stale */
    CHECK(stat(path, &st) == 0 && S_ISSOCK(st.st_mode));
    free(bound);
    CHECK_ERR(gsb__sock_connect(url, &cfd), GSB_EIO, "is gsbd running? (connection refused)");
    CHECK_OK(gsb__sock_listen(url, &lfd, NULL)); /* the stale file is replaced */
    CHECK_OK(gsb__sock_connect(url, &cfd));
    sfd = accept_one(lfd);
    exchange(cfd, sfd);
    close(sfd);
    close(cfd);
    close(lfd);
    CHECK(unlink(path) == 0);

    /* a file that is not a socket is never replaced */
    FILE *fp = fopen(path, "w");
    CHECK(fp != NULL);
    if (fp) {
        fputs("precious", fp);
        fclose(fp);
    }
    CHECK_ERR(gsb__sock_listen(url, &lfd, NULL), GSB_EIO, "not a socket");
    CHECK(stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 8);
    CHECK(unlink(path) == 0);
    /* a missing directory */
    char url2[320];
    snprintf(url2, sizeof url2, "unix://%s/nodir/s.sock", dir);
    CHECK_ERR(gsb__sock_listen(url2, &lfd, NULL), GSB_EIO, "directory does not exist");

    /* a relative path (relative to the working directory) */
    char rel[64], relurl[80];
    snprintf(rel, sizeof rel, "gsb-test-wire-%d.sock", (int)getpid());
    snprintf(relurl, sizeof relurl, "unix:%s", rel);
    unlink(rel);
    CHECK_OK(gsb__sock_listen(relurl, &lfd, &bound));
    CHECK(bound && strcmp(bound, relurl) == 0);
    CHECK_OK(gsb__sock_connect(relurl, &cfd));
    sfd = accept_one(lfd);
    exchange(cfd, sfd);
    close(sfd);
    close(cfd);
    close(lfd);
    free(bound);
    CHECK(unlink(rel) == 0);
    CHECK(rmdir(dir) == 0);
    CHECK(count_open_fds() == before);
}

int main(void)
{
    signal(SIGPIPE, SIG_DFL); /* a missing MSG_NOSIGNAL would kill the test */
    RUN(test_hdr_roundtrip);
    RUN(test_hdr_rejects);
    RUN(test_frame_parse);
    RUN(test_array_parse_ok);
    RUN(test_array_parse_rejects);
    RUN(test_inline_bounds);
    RUN(test_as_array);
    RUN(test_outmsg_layouts);
    RUN(test_outmsg_inline_vs_chunks);
    RUN(test_send_recv_inline);
    RUN(test_send_recv_chunks);
    RUN(test_recv_chunks_rejects);
    RUN(test_fd_passing);
    RUN(test_recv_timeout_and_close);
    RUN(test_many_parts);
    RUN(test_eintr);
    RUN(test_url_parse);
    RUN(test_tcp);
    RUN(test_unix);
    return testing_done();
}
