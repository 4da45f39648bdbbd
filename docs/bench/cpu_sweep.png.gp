set terminal pngcairo size 1000,650 noenhanced
set output '/work/main/docs/bench/cpu_sweep.png'
set datafile separator ','
set key autotitle columnhead
set title 'rtgen-bench: latency vs throughput (labels: concurrency)'
set xlabel 'output tokens/s'
set ylabel 'latency (ms)'
set logscale y
set grid
set key left top
plot '/work/main/docs/bench/cpu_sweep.csv' using 'output_tokens_per_s':'ttft_p50_ms' with linespoints title 'TTFT p50', \
     '/work/main/docs/bench/cpu_sweep.csv' using 'output_tokens_per_s':'ttft_p99_ms' with linespoints title 'TTFT p99', \
     '/work/main/docs/bench/cpu_sweep.csv' using 'output_tokens_per_s':'tpot_p50_ms' with linespoints title 'TPOT p50', \
     '/work/main/docs/bench/cpu_sweep.csv' using 'output_tokens_per_s':'tpot_p99_ms' with linespoints title 'TPOT p99', \
     '/work/main/docs/bench/cpu_sweep.csv' using 'output_tokens_per_s':'tpot_p50_ms':(sprintf('%d', column('concurrency'))) with labels offset 0,1 notitle
