"""Parsers that feed the profiling digest and the compile cache."""

from __future__ import annotations

from triforge.astra.compile import cache_key, options_for, parse_ptxas
from triforge.astra.profile import digest, parse_ncu_csv

PTXAS = """ptxas info    : Compiling entry function '_Z1kIfEvPT_' for 'sm_90'
ptxas info    : Function properties for _Z1kIfEvPT_
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 4100 bytes smem, 360 bytes cmem[0]
"""

CSV = '''==PROF== Connected to process 1
"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum","dram__bytes_write.sum","gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed","sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active","launch__registers_per_thread","launch__shared_mem_per_block_static","lts__t_sector_hit_rate.pct","launch__grid_size","launch__block_size","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
"","","usecond","Mbyte","Mbyte","%","%","%","register/thread","byte","%","","","ratio","ratio"
"0","k","10.50","60.00","30.00","85.1","20.3","70.2","24","4100","12.5","4096","256","3.5","0.7"
'''


def test_parse_ptxas_resources():
    r = parse_ptxas(PTXAS)["_Z1kIfEvPT_"]
    assert r == {"registers": 40, "smem": 4100, "stack": 16, "spill_stores": 8, "spill_loads": 12}


def test_cache_key_depends_on_source_options_and_version():
    base = cache_key("src", ["-arch=sm_90"], ["k<float>"], "13.0")
    assert base == cache_key("src", ["-arch=sm_90"], ["k<float>"], "13.0")
    assert len({base, cache_key("src2", ["-arch=sm_90"], ["k<float>"], "13.0"),
                cache_key("src", ["-arch=sm_90", "--use_fast_math"], ["k<float>"], "13.0"),
                cache_key("src", ["-arch=sm_90"], ["k<float>"], "13.1")}) == 4


def test_fast_math_is_an_option():
    assert "--use_fast_math" in options_for("sm_90", True) and "--use_fast_math" not in options_for("sm_90", False)
    assert "-arch=sm_90" in options_for("sm_90", False)


def test_ncu_digest():
    raw = parse_ncu_csv(CSV)
    d, text = digest(raw, min_bytes=60_000_000, resources={"registers": 24, "stack": 0, "spill_stores": 0, "spill_loads": 0})
    assert d["duration_us"] == 10.5 and d["dram_bytes"] == 90e6 and d["registers"] == 24
    assert d["stalls"][0] == ("long_scoreboard", 3.5)
    assert "DRAM throughput 85.1%" in text and "1.50x" in text and "more bytes than the minimum" in text
