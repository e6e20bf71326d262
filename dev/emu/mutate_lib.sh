# mutate_lib.sh: the driver loop of the mutation scripts (mutate_*.sh),
# sourced by them. The sourcing script sets
#   root     the repository;
#   tmp      a scratch folder (the copies, the check's out and err);
#   sources  the files under cuda/ that mutants edit (all copied each time);
#   mutants  "file|description|sed expression" (file one of sources);
# and defines run_check DIR: the check on DIR's copies of sources, stdout to
# "$tmp/out" and stderr to "$tmp/err", its exit status that of the check.
# mutate_all: the unmutated copies first (they must pass), then each mutant
# (one sed edit of a fresh copy; the tree is not touched), which must fail.
# Prints one line per mutant; returns 1 when the unmutated copies fail, a
# mutant survives or a sed matches nothing.
mutate_all() {
    local dir="$tmp/src" m f file what expr rc how survived=0
    mkdir -p "$dir"
    for f in "${sources[@]}"; do cp "$root/cuda/$f" "$dir/$f"; done
    if ! run_check "$dir"; then
        echo "the unmutated sources fail:"; cat "$tmp/out"; tail -20 "$tmp/err"; return 1
    fi
    echo "unmutated: $(tail -1 "$tmp/out")"
    for m in "${mutants[@]}"; do
        IFS='|' read -r file what expr <<< "$m"
        for f in "${sources[@]}"; do cp "$root/cuda/$f" "$dir/$f"; done
        sed -i "$expr" "$dir/$file"
        if cmp -s "$dir/$file" "$root/cuda/$file"; then
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
