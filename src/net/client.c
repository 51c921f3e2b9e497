/* PLACEHOLDER (lead): lets the build link until the client helper writes this file. */
#include "net/remote.h"
#include "core/data.h"

int gsb__remote_open(const char *url, struct gsb__remote **out) { (void)url; (void)out; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
void gsb__remote_close(struct gsb__remote *r) { (void)r; }
int gsb__remote_info(struct gsb__remote *r, char **out_json) { (void)r; (void)out_json; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
int gsb__remote_model_create(gsb_session *s, const gsb__estimator_desc *est, const char *params_json, gsb__model **out) { (void)s; (void)est; (void)params_json; (void)out; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
void gsb__remote_model_free(gsb__model *m) { (void)m; }
int gsb__remote_set_params(gsb__model *m, const char *params_json) { (void)m; (void)params_json; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
int gsb__remote_get_params(gsb__model *m, char **out_json) { (void)m; (void)out_json; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
int gsb__remote_set_meta(gsb__model *m, const char *json_object) { (void)m; (void)json_object; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
int gsb__remote_get_meta(gsb__model *m, char **out_json) { (void)m; (void)out_json; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
int gsb__remote_call(gsb__model *m, const char *method, const gsb_array *const *inputs, int n_inputs, const char *options_json, gsb_result **out) { (void)m; (void)method; (void)inputs; (void)n_inputs; (void)options_json; (void)out; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
int gsb__remote_get_attr(gsb__model *m, const char *name, gsb_result **out) { (void)m; (void)name; (void)out; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
int gsb__remote_list_attrs(gsb__model *m, char **out_json) { (void)m; (void)out_json; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
int gsb__remote_export(gsb__model *m, void **out_bytes, size_t *out_len) { (void)m; (void)out_bytes; (void)out_len; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
int gsb__remote_import(gsb_session *s, const void *bytes, size_t len, gsb__model **out) { (void)s; (void)bytes; (void)len; (void)out; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
int gsb__remote_save(gsb__model *m, const char *name) { (void)m; (void)name; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
int gsb__remote_load(gsb_session *s, const char *name, gsb__model **out) { (void)s; (void)name; (void)out; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
int gsb__remote_delete(gsb_session *s, const char *name) { (void)s; (void)name; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
int gsb__remote_list(gsb_session *s, char **out_json) { (void)s; (void)out_json; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
int gsb__remote_data_put(gsb_session *s, const gsb_array *a, struct gsb_data *d) { (void)s; (void)a; (void)d; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
void gsb__remote_data_free(gsb_session *s, struct gsb_data *d) { (void)s; (void)d; }
int gsb__remote_arena_alloc(gsb_session *s, size_t nbytes, void **out) { (void)s; (void)nbytes; (void)out; return gsb__err(GSB_EUNSUPPORTED, "remote sessions are not built yet"); }
void gsb__remote_arena_free(gsb_session *s, void *p) { (void)s; (void)p; }
