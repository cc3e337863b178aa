#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The ABI check (ctest abi.exports): three lists of the public functions
# must be the same set, and agree on when each came.
#   1. what the shared library exports (readelf --dyn-syms), with the
#      version node each symbol carries;
#   2. what the linker version script (reshard.map) names, node by node;
#   3. what the public headers declare with RS_API, with the @since of each
#      declaration's doc comment.
# Each exported symbol must carry the node the map gives it, and a function
# documented "@since X.Y" must be in node RESHARD_X.Y. The map itself must
# name every symbol (no wildcard among the globals), hide the rest in its
# first node (local: *), and chain its nodes, each release inheriting the
# one before it.
# Usage: check_exports.sh LIBRARY HEADER_DIR MAP
set -eu
LC_ALL=C
export LC_ALL
lib="$1"
headers="$2"
map="$3"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
problem() {
  echo "abi.exports: $*"
  status=1
}
# Lines of $1 that are not in $2 (both sorted), indented.
only_in() { comm -23 "$1" "$2" | sed 's/^/    /'; }

# --- 1. exported: "name node", one per defined dynamic symbol; the
# symbols naming the nodes themselves (RESHARD_0.1@@RESHARD_0.1) are left
# out, an unversioned symbol gets the node "-".
readelf --dyn-syms -W "$lib" |
  awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && NF >= 8 { print $8 }' |
  awk -F@ '!($1 == $NF && $1 ~ /^RESHARD_/) {
             print $1, (NF > 1 ? $NF : "-") }' |
  sort -u > "$tmp/exported"
cut -d' ' -f1 "$tmp/exported" | sort -u > "$tmp/exported.names"

# --- 2. the map: comments dropped, one token per line, then read node by
# node into records: "sym NAME NODE", "local NAME NODE",
# "node NAME PARENT" (PARENT "-" when none).
tr '\n' ' ' < "$map" |
  sed 's:/\*[^*]*\*\{1,\}\([^/*][^*]*\*\{1,\}\)*/: :g; s/[{};:]/ & /g' |
  tr -s ' \t' '\n\n' |
  awk 'NF == 0 { next }
       depth == 0 && closing {
         if ($0 == ";") { print "node", node, (parent == "" ? "-" : parent);
                          closing = 0 }
         else parent = $0
         next }
       depth == 0 && $0 == "{" { depth = 1; parent = ""; section = ""; next }
       depth == 0 { node = $0; next }
       $0 == "}" { depth = 0; closing = 1; next }
       $0 == ":" || $0 == ";" { next }
       $0 == "global" || $0 == "local" { section = $0; next }
       section == "global" { print "sym", $0, node; next }
       section == "local" { print "local", $0, node; next }
       { print "bad", $0, node }' > "$tmp/map"
awk '$1 == "sym" { print $2, $3 }' "$tmp/map" | sort > "$tmp/mapped"
cut -d' ' -f1 "$tmp/mapped" | sort > "$tmp/mapped.names"
dups=$(uniq -d "$tmp/mapped.names")
[ -z "$dups" ] || problem "the map names these more than once:" $dups
sort -u -o "$tmp/mapped.names" "$tmp/mapped.names"
wild=$(awk '$1 == "sym" && $2 ~ /[*?[]/ { print $2 }' "$tmp/map")
[ -z "$wild" ] || problem "the map must name each symbol, not match: $wild"
bad=$(awk '$1 == "bad" { print $2 " (" $3 ")" }' "$tmp/map")
[ -z "$bad" ] || problem "the map has names outside global:/local: $bad"
awk '$1 == "node" { print $2, $3 }' "$tmp/map" > "$tmp/nodes"
if [ ! -s "$tmp/nodes" ]; then
  problem "the map has no version node"
else
  chain=$(awk 'NR == 1 && $2 != "-" { print $1 " inherits " $2 ", but it is the first" }
               NR > 1 && $2 != last { print $1 " inherits " $2 ", not " last }
               $1 !~ /^RESHARD_[0-9]+\.[0-9]+$/ { print "node " $1 " is not RESHARD_X.Y" }
               { last = $1 }' "$tmp/nodes")
  [ -z "$chain" ] || problem "the map's nodes do not chain: $chain"
  first=$(head -n1 "$tmp/nodes" | cut -d' ' -f1)
  locals=$(awk '$1 == "local" { print $2 "@" $3 }' "$tmp/map")
  [ "$locals" = "*@$first" ] ||
    problem "the map must hide the rest once, with 'local: *;' in its" \
      "first node $first; it has: ${locals:-nothing}"
fi

# --- 3. the headers: "name since" for each RS_API declaration; since is
# "-" when the doc comment right above it has no @since (or there is none).
for h in "$headers"/*.h; do
  awk 'in_comment {
         doc = doc " " $0
         if ($0 ~ /\*\//) { in_comment = 0; have_doc = is_doc }
         next }
       /^[ \t]*\/\*/ {
         is_doc = ($0 ~ /^[ \t]*\/\*\*/); doc = $0; have_doc = 0
         if ($0 ~ /\*\//) have_doc = is_doc; else in_comment = 1
         next }
       /^[ \t]*#/ { have_doc = 0; next }
       /^[ \t]*$/ { have_doc = 0; next }
       /RS_API/ && !pending { pending = 1; decl = "" }
       pending {
         decl = decl " " $0
         if (match(decl, /[A-Za-z_][A-Za-z_0-9]*[ \t]*\(/)) {
           name = substr(decl, RSTART, RLENGTH); sub(/[ \t]*\($/, "", name)
           since = "-"
           if (have_doc && match(doc, /@since[ \t]+[0-9]+\.[0-9]+/)) {
             since = substr(doc, RSTART, RLENGTH); sub(/@since[ \t]+/, "", since)
           }
           print name, since
           pending = 0; have_doc = 0
         }
         next }
       { have_doc = 0 }' "$h"
done | sort > "$tmp/declared"
cut -d' ' -f1 "$tmp/declared" | sort > "$tmp/declared.names"
dups=$(uniq -d "$tmp/declared.names")
[ -z "$dups" ] || problem "the headers declare these more than once:" $dups
sort -u -o "$tmp/declared.names" "$tmp/declared.names"

# --- The three sets.
for pair in "exported mapped" "exported declared" "mapped exported" \
  "mapped declared" "declared exported" "declared mapped"; do
  set -- $pair
  extra=$(only_in "$tmp/$1.names" "$tmp/$2.names")
  [ -z "$extra" ] || problem "$1 but not $2:
$extra"
done

# --- Each exported symbol in its node; each @since matching its node.
wrong=$(join "$tmp/exported" "$tmp/mapped" | awk '$2 != $3 {
          print "    " $1 ": exported in " $2 ", the map says " $3 }')
[ -z "$wrong" ] || problem "symbols in the wrong version node:
$wrong"
nosince=$(awk '$2 == "-" { print "    " $1 }' "$tmp/declared")
[ -z "$nosince" ] || problem "RS_API declarations whose doc comment has no @since:
$nosince"
wrong=$(join "$tmp/declared" "$tmp/mapped" | awk '$2 != "-" &&
          "RESHARD_" $2 != $3 {
          print "    " $1 ": @since " $2 ", but the map puts it in " $3 }')
[ -z "$wrong" ] || problem "@since disagrees with the map:
$wrong"

if [ "$status" -ne 0 ]; then
  exit 1
fi
echo "$(wc -l < "$tmp/exported.names") rs_ symbols exported, each declared" \
  "with its @since and in its node of the map ($(cut -d' ' -f1 "$tmp/nodes" |
  tr '\n' ' ' | sed 's/ $//'))"
