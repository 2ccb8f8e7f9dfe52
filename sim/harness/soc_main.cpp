// Verilator harness of the SoC simulator (sim/run.py builds and runs it; docs/soc.md).
//
// The clock runs here: the harness loads the program through the SoC's debug bus (main memory
// directly into its DPI-backed storage), releases the harts, runs until a hart writes EXIT or the
// cycle budget runs out, streams console bytes to stdout as they are written, then reads the
// statistics and the requested memory ranges and writes them to a JSON result file.
//
//   soc_sim --image IMG --result OUT.json [--max-cycles N] [--dump ADDR:LEN:FILE]... [--trace F.fst]
//
// The debug port is a four-phase handshake (soc/debug_port.py); Verilator spells the port
// dbg__x as dbg___05Fx. There is no reset: every register starts at its initial value.
// IMG is a flat list of little-endian (address, word) pairs: only the non-zero words of the
// program (every memory starts zeroed).

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "Vsoc_sim.h"
#include "Vsoc_sim__Dpi.h"
#include "debug_port.h"
#include "model_eval.h"
#include "pyard_soc.h"
#include "verilated.h"
PYARD_DECLARE_ROOT_EVAL(Vsoc_sim)
#define PYARD_SIM_RAM_WORDS (PYARD_MEM_SIZE / 4)  // main memory, word-addressed from PYARD_MEM_BASE
#include "sim_ram.h"
#ifdef PYARD_TRACE
#include "verilated_fst_c.h"
#endif

namespace {

// The accelerator's status and counters (docs/isa.md), read over the debug bus when the run ends.
const struct {
    const char* name;
    uint32_t offset;
} kCounters[] = {
    {"cycles_busy", 0x100},         {"macs_lo", 0x104},           {"macs_hi", 0x108},
    {"dma_rd_bytes", 0x10C},        {"dma_wr_bytes", 0x110},      {"stall_exec_on_load", 0x114},
    {"stall_exec_on_store", 0x118}, {"stall_dma_read", 0x11C},    {"stall_dma_write", 0x120},
    {"stall_queue", 0x124},         {"vec_elems", 0x128},         {"vec_cycles", 0x12C},
    {"status", 0x008},              {"error_seq", 0x014},
};

struct Sim {
    std::unique_ptr<VerilatedContext> ctx{new VerilatedContext};
    std::unique_ptr<Vsoc_sim> top;
#ifdef PYARD_TRACE
    std::unique_ptr<VerilatedFstC> fst;
#endif
    std::unique_ptr<FastEval<Vsoc_sim, Vsoc_sim___024root>> eval;
    uint64_t time = 0;
    bool debug_port_stuck = false;

    explicit Sim(const char* trace) {
        ctx->randReset(0);
#ifdef PYARD_TRACE
        ctx->traceEverOn(true);
#endif
        top.reset(new Vsoc_sim{ctx.get()});
#ifdef PYARD_TRACE
        if (trace) {
            fst.reset(new VerilatedFstC);
            top->trace(fst.get(), 99);
            fst->open(trace);
        }
#else
        if (trace) {
            std::fprintf(stderr, "soc_sim: this build has no tracing\n");
            std::exit(3);
        }
#endif
#ifdef PYARD_TRACE
        // A traced model's eval() also marks the cycle's activity for the trace: the public one.
        eval.reset(new FastEval<Vsoc_sim, Vsoc_sim___024root>(top.get(), nullptr));
#else
        eval.reset(new FastEval<Vsoc_sim, Vsoc_sim___024root>(top.get(), &Vsoc_sim___024root___eval));
#endif
    }
    ~Sim() {
#ifdef PYARD_TRACE
        if (fst) fst->close();
#endif
        top->final();
    }

    inline void tick() {
        top->clk = 0;
        (*eval)();
#ifdef PYARD_TRACE
        if (fst) fst->dump(time);
#endif
        time += 5;
        top->clk = 1;
        (*eval)();
#ifdef PYARD_TRACE
        if (fst) fst->dump(time);
#endif
        time += 5;
    }

    // One debug-bus access; false on a bus error or if it does not complete within the budget
    // (after which the port is not used again: a late answer would be taken for the next one's).
    bool access(uint32_t addr, bool write, uint32_t wdata, uint32_t* rdata) {
        if (debug_port_stuck) return false;
        const DebugAnswer a = debug_access(top.get(), [this] { tick(); }, addr, write, wdata, 100000);
        if (rdata) *rdata = a.rdata;
        debug_port_stuck = !a.answered;
        return a.answered && !a.err;
    }
};

bool in_main_memory(uint32_t addr) { return addr >= PYARD_MEM_BASE && addr - PYARD_MEM_BASE < PYARD_MEM_SIZE; }

uint64_t instret(Vsoc_sim* top, int hart) {
#if PYARD_NHARTS == 1
    (void)hart;
    return top->instret;
#else
    return (uint64_t)top->instret[2 * hart] | (uint64_t)top->instret[2 * hart + 1] << 32;
#endif
}

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "soc_sim: %s\n", msg.c_str());
    std::exit(3);
}

}  // namespace

int main(int argc, char** argv) {
    const char *image = nullptr, *result = nullptr, *trace = nullptr;
    uint64_t max_cycles = 100000000;
    std::vector<Dump> dumps;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (i + 1 >= argc) die("missing value after " + a);
        const char* v = argv[++i];
        if (a == "--image") image = v;
        else if (a == "--result") result = v;
        else if (a == "--trace") trace = v;
        else if (a == "--max-cycles") max_cycles = std::strtoull(v, nullptr, 0);
        else if (a == "--dump") {
            Dump d;
            if (!parse_dump(v, &d)) die("bad --dump " + std::string(v));
            dumps.push_back(d);
        } else die("unknown option " + a);
    }
    if (!image || !result) die("--image and --result are required");

    Sim sim(trace);
    Vsoc_sim* top = sim.top.get();
    top->hold = 1;
    sim.tick();

    // Load: main memory directly, everything else through the debug bus (ITCM writes reach every hart).
    FILE* f = std::fopen(image, "rb");
    if (!f) die(std::string("cannot open ") + image);
    uint32_t pair[2];
    while (std::fread(pair, sizeof pair, 1, f) == 1) {
        if (in_main_memory(pair[0])) g_mem[(pair[0] - PYARD_MEM_BASE) / 4] = pair[1];
        else if (!sim.access(pair[0], true, pair[1], nullptr))
            die("cannot load the word at " + std::to_string(pair[0]) + " (no memory there)");
    }
    std::fclose(f);

    top->hold = 0;
    const auto start = std::chrono::steady_clock::now();
    uint64_t cycles = 0, tile_cycles = 0;
    bool exited = false;
    while (cycles < max_cycles) {
        sim.tick();
        cycles++;
        tile_cycles += top->tile_clocked;  // latched while the clock was low: the edge just taken
        if (top->console_valid) {
            std::putchar(top->console_data);
            std::fflush(stdout);
        }
        if (top->exit_valid) {
            exited = true;
            break;
        }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::vector<uint64_t> retired(PYARD_NHARTS);
    for (int h = 0; h < PYARD_NHARTS; h++) retired[h] = instret(top, h);
    uint32_t exit_code = top->exit_code;
    top->hold = 1;  // harts stop; the debug bus reads results

    FILE* out = std::fopen(result, "w");
    if (!out) die(std::string("cannot write ") + result);
    std::fprintf(out, "{\"exited\": %s, \"exit_code\": %u, \"cycles\": %llu, \"tile_cycles\": %llu, ",
                 exited ? "true" : "false", exit_code, (unsigned long long)cycles, (unsigned long long)tile_cycles);
    std::fprintf(out, "\"seconds\": %.6f, \"instret\": [", seconds);
    for (int h = 0; h < PYARD_NHARTS; h++) std::fprintf(out, "%s%llu", h ? ", " : "", (unsigned long long)retired[h]);
    std::fprintf(out, "], \"counters\": {");
    bool first = true;
    for (const auto& c : kCounters) {
        uint32_t value = 0;
        bool ok = sim.access(PYARD_ACCEL_BASE + c.offset, false, 0, &value);
        std::fprintf(out, "%s\"%s\": %lld", first ? "" : ", ", c.name, ok ? (long long)value : -1LL);
        first = false;
    }
    std::fprintf(out, "}, \"dump_errors\": [");
    first = true;
    for (const auto& d : dumps) {
        std::vector<uint32_t> words((d.len + 3) / 4);
        bool ok = true;
        for (size_t w = 0; w < words.size() && ok; w++) {
            uint32_t addr = d.addr + 4 * w;
            if (in_main_memory(addr)) words[w] = g_mem[(addr - PYARD_MEM_BASE) / 4];
            else ok = sim.access(addr, false, 0, &words[w]);
        }
        FILE* df = std::fopen(d.path.c_str(), "wb");
        if (ok && df) std::fwrite(words.data(), 1, d.len, df);
        if (df) std::fclose(df);
        if (!ok || !df) {
            std::fprintf(out, "%s%u", first ? "" : ", ", d.addr);
            first = false;
        }
    }
    std::fprintf(out, "]}\n");
    std::fclose(out);
    return 0;
}
