/*
 * cuml_compat.h - the cuML version gsb answers to: cuml.__version__ of the
 * Python shim (through gsb_info_json) and "cuml_version" of gsbd's /health,
 * one string so the two cannot disagree.  The cuML API level gsb follows,
 * with gsb's own version as a PEP 440 local label, so version parsers
 * (packaging.version) read it and a reader sees what answers.
 */
#ifndef GSB_CORE_CUML_COMPAT_H
#define GSB_CORE_CUML_COMPAT_H

#include "gsb.h"

#define GSB__CUML_API_LEVEL "25.02.00"
#define GSB__CUML_VERSION GSB__CUML_API_LEVEL "+gsb." GSB_VERSION_STRING

#endif
