#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Print the dpkg symbols file of libreshard0, made from the linker version
# script capi/reshard.map, so that the two cannot drift apart: every
# symbol with the version node that added it, and the node's release as
# the minimum version (RESHARD_0.1 -> 0.1.0, RESHARD_0.2 -> 0.2.0, ...);
# each node's own name is a symbol too (RESHARD_0.2@RESHARD_0.2).
# debian/rules runs it before dh_makeshlibs, whose dpkg-gensymbols -c4
# then fails the build on any difference from what the library exports.
#
#   sh debian/gen-symbols.sh capi/reshard.map > debian/libreshard0.symbols
set -eu
map=${1:?usage: gen-symbols.sh path/to/reshard.map}
[ -r "$map" ] || { echo "gen-symbols.sh: cannot read $map" >&2; exit 1; }
exec perl -e '
  use strict; use warnings;
  local $/; my $t = <STDIN>;
  $t =~ s{/\*.*?\*/}{ }gs;    # C comments
  $t =~ s{#[^\n]*}{}g;        # shell-style comments (ld accepts them too)
  print "libreshard.so.0 libreshard0 #MINVER#\n",
        "* Build-Depends-Package: libreshard-dev\n";
  my ($symbols, %seen) = (0);
  while ($t =~ /\G\s*([A-Za-z_][\w.]*)\s*\{(.*?)\}\s*([A-Za-z_][\w.]*)?\s*;/gsc) {
    my ($node, $body) = ($1, $2);
    $node =~ /^RESHARD_(\d+)\.(\d+)$/
      or die "gen-symbols.sh: node $node is not RESHARD_<major>.<minor>\n";
    my $min = "$1.$2.0";
    print " $node\@$node $min\n";
    my $scope = "global";
    for my $tok ($body =~ /(global\s*:|local\s*:|[^;:\s]+\s*;)/g) {
      if ($tok =~ /^(global|local)/) { $scope = $1; next; }
      (my $sym = $tok) =~ s/\s*;$//;
      next if $scope eq "local";
      $sym =~ /^[A-Za-z_]\w*$/
        or die "gen-symbols.sh: $node: \"$sym\" is not a symbol name\n";
      die "gen-symbols.sh: $sym is in two nodes\n" if $seen{$sym}++;
      print " $sym\@$node $min\n";
      $symbols++;
    }
  }
  $t =~ /\G\s*\z/gc or die "gen-symbols.sh: cannot read the map from: ",
    substr($t, pos($t) // 0, 60), "\n";
  $symbols or die "gen-symbols.sh: no symbols in the map\n";
' < "$map"
