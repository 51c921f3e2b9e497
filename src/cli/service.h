/*
 * service.h - `gsb service install|uninstall|status`: gsbd as a systemd user
 * unit (Linux, and WSL2 with systemd enabled).
 *
 *   gsb service install [--dry-run] [--unit-dir DIR] [--name NAME] [--gsbd PATH]
 *                       [-- gsbd args...]
 *   gsb service uninstall [--dry-run] [--unit-dir DIR] [--name NAME]
 *   gsb service status [--unit-dir DIR] [--name NAME]
 *
 * install writes DIR/NAME.service (default ~/.config/systemd/user/gsbd.service)
 * with ExecStart=<absolute path of gsbd> <args> and Restart=on-failure, then,
 * where systemd runs, `systemctl --user daemon-reload` and `enable --now`,
 * printing each command and its result.  Where it does not, it says so and
 * prints how to start gsbd by hand.  $GSB_SYSTEMCTL names another systemctl
 * (a wrapper, or a fake one in tests) and is then taken as available.
 *
 * This file uses only libc and the public API: the CLI links libgsb, whose
 * internal symbols are hidden.
 */
#ifndef GSB_CLI_SERVICE_H
#define GSB_CLI_SERVICE_H

#include <stddef.h>

/* argv[0] is the subcommand ("install", ...); returns the exit status. */
int gsb__cli_service(int argc, char **argv);

/*
 * The text of the unit file, pure (no I/O): gsbd_path must be absolute;
 * args are gsbd's arguments and env "KEY=VALUE" settings for Environment=,
 * both quoted for systemd (spaces, quotes, backslashes, '%' specifiers, '$'
 * expansion and a lone ';' all come through literally).  Writes at most cap
 * bytes (NUL-terminated when cap > 0) and returns the length the whole text
 * needs, as snprintf does; returns -1 with *why set when an input cannot be
 * written into a unit file (relative path, a control character such as a
 * newline, an env entry without '=').
 */
int gsb__service_unit_text(const char *gsbd_path, const char *const *args, int nargs,
                           const char *const *env, int nenv, char *out, size_t cap,
                           const char **why);

/* One argument quoted for an ExecStart= line (dollar != 0) or an
 * Environment= value (dollar == 0: '$' is not expanded there); same return
 * convention as gsb__service_unit_text, -1 for a control character. */
int gsb__service_quote(const char *arg, int dollar, char *out, size_t cap);

#endif
