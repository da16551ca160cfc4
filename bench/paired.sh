# Sourced by the bench scripts that time two variants in paired rounds on
# a test cluster, once they set root (the checkout): their settings and
# the summary of the rounds.

go="${GO:-go}"
: "${KUBECONFIG:?KUBECONFIG must name a test cluster}"
kubectl="${KHOOK_TESTBIN:-$root/.cache/testbin/bin}/kubectl"

# median_s FILE: the median of FILE's numbers (milliseconds, one a line),
# in seconds.
median_s() { sort -n "$1" | awk '{ t[NR] = $1 } END { printf "%.3f", t[int((NR + 1) / 2)] / 1000 }'; }

# paired_report WHAT A FILE_A B FILE_B: the machine, the medians of A and B
# (FILE_x: a wall time a round), the median of the per-round ratios A/B
# and every round's figures.
paired_report() {
	local what=$1 a=$2 fa=$3 b=$4 fb=$5 ratio
	ratio="$(paste "$fa" "$fb" | awk '{ printf "%.4f\n", $1 / $2 }' | sort -n | awk '{ t[NR] = $1 } END { printf "%.3f", t[int((NR + 1) / 2)] }')"
	echo
	echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $(wc -l <"$fa") paired rounds, alternating order"
	echo "$what: $a median $(median_s "$fa") s, $b median $(median_s "$fb") s"
	echo "median of the per-round ratios $a/$b: $ratio"
	echo "$a: $(tr '\n' ' ' <"$fa")"
	echo "$b: $(tr '\n' ' ' <"$fb")"
}
