#!/usr/bin/env bash
# man-page.sh TESSERA: prints tessera(1), a manual page made of the command's own --help texts
# (the top level, then every command and subcommand), so it cannot say what the binary does not.
# Run by the build (share/man/man1/tessera.1); `man ./tessera.1` reads it from the build tree.
set -euo pipefail
bin=${1:?usage: man-page.sh path/to/tessera}

# The names under "Subcommands:" in a --help text.
subcommands() { sed -n '/^Subcommands:/,$p' | sed -n 's/^  \([a-z][a-z0-9-]*\) .*/\1/p'; }
# troff-safe: a leading dot or quote would be a request; backslashes are escapes.
escape() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }

version=$("$bin" --version | awk '{print $2}')
cat <<HEADER
.TH TESSERA 1 "" "tessera $version" "User Commands"
.SH NAME
tessera \\- a parameter server for distributed training
.SH SYNOPSIS
.B tessera
.I command
[\\fIflags\\fR]
.SH DESCRIPTION
.nf
HEADER
"$bin" --help | escape
echo ".fi"

section() {  # section "cmd sub ..."
  local words=($1)
  local text
  text=$("$bin" "${words[@]}" --help)
  echo ".SH \"TESSERA ${1^^}\""
  echo ".nf"
  printf '%s\n' "$text" | escape
  echo ".fi"
  local sub
  for sub in $(printf '%s\n' "$text" | subcommands); do section "$1 $sub"; done
}
for cmd in $("$bin" --help | subcommands); do section "$cmd"; done

cat <<'FOOTER'
.SH FILES
.TP
.I ~/.config/tessera/login.json
the API token of `tessera login` (or $TESSERA_CONFIG_DIR)
.SH SEE ALSO
.BR etcd (1),
the guides in /usr/share/doc/tessera (or docs/ in the source tree).
FOOTER
