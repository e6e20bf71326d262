# mutate_lib.sh: the driver loop of the mutation scripts (mutate_*.sh),
# sourced by them. The sourcing script sets
#   root     the repository;
#   tmp      a scratch folder (the copies, the check's out and err);
#   sources  the files that mutants edit (all copied each time): a name
#            under cuda/, or a path from the repository's root (dev/...);
#   mutants  "file|description|sed expression" (file the name of one of
#            sources, without its folder);
# and defines run_check DIR: the check on DIR's copies of sources, stdout to
# "$tmp/out" and stderr to "$tmp/err", its exit status that of the check.
# mutate_all: the unmutated copies first (they must pass), then each mutant
# (one sed edit of a fresh copy; the tree is not touched), which must fail.
# Prints one line per mutant; returns 1 when the unmutated copies fail, a
# mutant survives or a sed matches nothing.
# origin NAME: the tree's file of the source named NAME (its folder dropped)
origin() {
    local f
    for f in "${sources[@]}"; do
        if [ "$(basename "$f")" = "$1" ]; then
            case "$f" in */*) echo "$root/$f" ;; *) echo "$root/cuda/$f" ;; esac
            return
        fi
    done
}
copy_sources() { # DIR: fresh copies of every source, by name
    local f
    for f in "${sources[@]}"; do cp "$(origin "$(basename "$f")")" "$1/$(basename "$f")"; done
}
mutate_all() {
    local dir="$tmp/src" m file what expr rc how survived=0
    mkdir -p "$dir"
    copy_sources "$dir"
    if ! run_check "$dir"; then
        echo "the unmutated sources fail:"; cat "$tmp/out"; tail -20 "$tmp/err"; return 1
    fi
    echo "unmutated: $(tail -1 "$tmp/out")"
    for m in "${mutants[@]}"; do
        IFS='|' read -r file what expr <<< "$m"
        copy_sources "$dir"
        sed -i "$expr" "$dir/$file"
        if cmp -s "$dir/$file" "$(origin "$file")"; then
            echo "NOT APPLIED  $what (the sed matched nothing)"; survived=1; continue
        fi
        run_check "$dir"
        rc=$?
        if [ $rc -eq 0 ]; then
            echo "SURVIVED     $what"; survived=1
        else
            # a FAIL line, or UBSan's (run_gather_im2col.sh's alignment check)
            how="$(grep -m1 -e '^FAIL' -e 'runtime error' "$tmp/err" | cut -c1-150)"
            [ -z "$how" ] && how="(no FAIL line: $(grep -m1 -v '^refused' "$tmp/err" | cut -c1-120))"
            echo "caught       $what: exit $rc, $(grep -c '^FAIL' "$tmp/err") FAIL lines; first: $how"
        fi
    done
    return $survived
}
