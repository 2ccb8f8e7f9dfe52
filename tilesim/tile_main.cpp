// Verilator harness of the tile simulator (tilesim/run.py builds and runs it; docs/tile.md).
//
// The clock runs here, and so does the host's side of the tile: the harness loads main memory,
// writes the commands through the tile's AXI4-Lite port (the same register writes firmware makes),
// waits for the interrupt, then reads the status and counters and writes the requested memory
// ranges and a JSON result. No Python runs while the tile does.
//
//   tile_sim --image IMG --commands CMDS --result OUT.json [--max-cycles N] [--dump ADDR:LEN:FILE]...
//
// IMG: the first bytes of main memory (from address 0). CMDS: little-endian words, each command
// as its word count followed by its words. The harness reaches the registers through the port dbg.
//
//   tile_sim --serve
//
// A persistent device for the host runtime (runtime/device.py): requests on stdin, replies on
// stdout, all little-endian, so the tile keeps its memory between batches of commands. On start it
// writes ID, HWCFG (u32 each) and the memory size (u64). Requests, each a one-byte code:
//   'W' addr:u64 len:u64 bytes       write memory                -> u8 0
//   'R' addr:u64 len:u64             read memory                 -> u8 0, the bytes
//   'E' budget:u64 n:u32 words[n]    push the commands (as CMDS) and run until the interrupt or
//                                    `budget` cycles             -> u8 0, the run record (below)
//   'Q'                              quit
// A request outside the memory or malformed -> u8 1, len:u32, the message. The run record: u8
// interrupt, cycles:u64, commands pushed (u32; pushing stops at an error), STATUS, ERROR_SEQ, then the 12 counters of kCounters (u32 each). After an
// error the harness clears it (CONTROL), so the tile takes the next batch; a run past its budget
// leaves the tile as it is, and the runtime stops this process.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>
#include <chrono>

#include "Vtile_sim.h"
#include "Vtile_sim__Dpi.h"
#include "debug_port.h"  // sim/harness/
#include "model_eval.h"  // sim/harness/
#include "verilated.h"
PYARD_DECLARE_ROOT_EVAL(Vtile_sim)
#define PYARD_SIM_RAM_WORDS (PYARD_MEM_BYTES / 4)
#include "sim_ram.h"  // sim/harness/

namespace {

// Registers of docs/isa.md.
constexpr uint32_t STATUS = 0x008, CONTROL = 0x00C, IRQ_ENABLE = 0x010, ERROR_SEQ = 0x014, CMD0 = 0x040,
                   CMD_PUSH = 0x080;
const struct {
    const char* name;
    uint32_t offset;
} kCounters[] = {
    {"cycles_busy", 0x100},         {"macs_lo", 0x104},        {"macs_hi", 0x108},
    {"dma_rd_bytes", 0x10C},        {"dma_wr_bytes", 0x110},   {"stall_exec_on_load", 0x114},
    {"stall_exec_on_store", 0x118}, {"stall_dma_read", 0x11C}, {"stall_dma_write", 0x120},
    {"stall_queue", 0x124},         {"vec_elems", 0x128},      {"vec_cycles", 0x12C},
};

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "tile_sim: %s\n", msg.c_str());
    std::exit(3);
}

struct Sim {
    std::unique_ptr<VerilatedContext> ctx{new VerilatedContext};
    std::unique_ptr<Vtile_sim> top;
    std::unique_ptr<FastEval<Vtile_sim, Vtile_sim___024root>> eval;
    uint64_t cycles = 0;
    uint64_t vector_clocked = 0;  // cycles whose edge clocked the vector engine (its gate's enable)

    Sim() {
        ctx->randReset(0);
        top.reset(new Vtile_sim{ctx.get()});
        eval.reset(new FastEval<Vtile_sim, Vtile_sim___024root>(top.get(), &Vtile_sim___024root___eval));
    }
    ~Sim() { top->final(); }

    inline void tick() {
        top->clk = 0;
        (*eval)();
        vector_clocked += top->vector_clocked;  // latched at this falling edge for the next rising one
        top->clk = 1;
        (*eval)();
        cycles++;
    }

    // One register access through the registered four-phase port (sim/harness/debug_port.h).
    uint32_t access(uint32_t addr, bool write, uint32_t wdata) {
        const DebugAnswer a = debug_access(top.get(), [this] { tick(); }, addr, write, wdata, 1000);
        if (!a.answered) die("the tile's AXI4-Lite port did not answer");
        return a.rdata;
    }
    void write(uint32_t addr, uint32_t data) { access(addr, true, data); }
    uint32_t read(uint32_t addr) { return access(addr, false, 0); }
};

std::vector<uint32_t> read_words(const char* path) {
    FILE* f = std::fopen(path, "rb");
    if (!f) die(std::string("cannot open ") + path);
    std::vector<uint32_t> words;
    uint32_t w;
    while (std::fread(&w, 4, 1, f) == 1) words.push_back(w);
    std::fclose(f);
    return words;
}

// Pushes each command of `stream` (count, words) when the queue has a slot, then waits for the
// interrupt; false if it did not come within `max_cycles` of the first write. Pushing stops at an
// error (the tile would drop the rest); `*pushed` counts the commands pushed. `*cycles` counts from
// the first command's push (its words staged in the command registers before it start nothing) to
// the interrupt: the tile's time, whatever the host port's own speed.
bool run_stream(Sim& sim, const std::vector<uint32_t>& stream, uint64_t max_cycles, uint64_t* cycles,
                uint32_t* pushed) {
    Vtile_sim* top = sim.top.get();
    const uint64_t start = sim.cycles;
    uint64_t first_push = start;
    *pushed = 0;
    for (size_t i = 0; i < stream.size();) {
        const uint32_t n = stream[i++];
        if (n > 16 || i + n > stream.size()) die("malformed command stream");
        uint32_t status;
        while (((status = sim.read(STATUS)) >> 16 & 0xFF) == 0 && !(status & 4) && sim.cycles - start < max_cycles) {
            for (int k = 0; k < 16; k++) sim.tick();  // the queue is full: wait for a slot
        }
        if (status & 4) break;
        for (uint32_t k = 0; k < n; k++) sim.write(CMD0 + 4 * k, stream[i + k]);
        if (*pushed == 0) first_push = sim.cycles;
        sim.write(CMD_PUSH, 1);
        ++*pushed;
        i += n;
    }
    bool irq = false;
    while (sim.cycles - start < max_cycles) {
        if (top->irq) {
            irq = true;
            break;
        }
        sim.tick();
    }
    *cycles = sim.cycles - first_push;
    return irq;
}

void start_tile(Sim& sim) {
    for (int i = 0; i < 4; i++) sim.tick();
    sim.write(IRQ_ENABLE, 0b11);
    sim.write(CONTROL, 0b101);  // clear done, zero the counters
}

// --serve: stdin/stdout requests (the header comment). Reads block; EOF on stdin ends the process.
void get(void* p, size_t n) {
    if (n && std::fread(p, 1, n, stdin) != n) std::exit(0);  // the runtime has gone
}
void put(const void* p, size_t n) { std::fwrite(p, 1, n, stdout); }
template <typename T>
T get_value() {
    T v;
    get(&v, sizeof v);
    return v;
}
template <typename T>
void put_value(T v) {
    put(&v, sizeof v);
}
void refuse(const std::string& msg) {
    put_value<uint8_t>(1);
    put_value<uint32_t>(msg.size());
    put(msg.data(), msg.size());
}
bool in_memory(uint64_t addr, uint64_t len) { return addr <= g_mem.size() * 4 && len <= g_mem.size() * 4 - addr; }

void serve_run(Sim& sim) {
    const uint64_t budget = get_value<uint64_t>();
    std::vector<uint32_t> stream(get_value<uint32_t>());
    get(stream.data(), stream.size() * 4);
    for (size_t i = 0; i < stream.size(); i += 1 + stream[i]) {
        if (stream[i] > 16 || i + 1 + stream[i] > stream.size()) return refuse("malformed command stream");
    }
    sim.write(CONTROL, 0b101);  // clear done, zero the counters: the record is this batch's
    uint64_t cycles = 0;
    uint32_t pushed = 0;
    const bool irq = run_stream(sim, stream, budget, &cycles, &pushed);
    const uint32_t status = sim.read(STATUS), error_seq = sim.read(ERROR_SEQ);
    put_value<uint8_t>(0);
    put_value<uint8_t>(irq);
    put_value<uint64_t>(cycles);
    put_value<uint32_t>(pushed);
    put_value<uint32_t>(status);
    put_value<uint32_t>(error_seq);
    for (const auto& c : kCounters) put_value<uint32_t>(sim.read(c.offset));
    if (irq && (status & 4)) sim.write(CONTROL, 0b011);  // clear the error: the tile takes new work
}

int serve() {
    Sim sim;
    start_tile(sim);
    put_value<uint32_t>(sim.read(0x000));
    put_value<uint32_t>(sim.read(0x004));
    put_value<uint64_t>(g_mem.size() * 4);
    std::fflush(stdout);
    auto* bytes = reinterpret_cast<char*>(g_mem.data());
    for (;;) {
        const uint8_t code = get_value<uint8_t>();
        if (code == 'Q') return 0;
        if (code == 'E') {
            serve_run(sim);
        } else if (code == 'W' || code == 'R') {
            const uint64_t addr = get_value<uint64_t>(), len = get_value<uint64_t>();
            if (!in_memory(addr, len)) {
                if (code == 'W') {  // consume the bytes so the stream stays in step
                    std::vector<char> skip(len);
                    get(skip.data(), len);
                }
                refuse("range outside the device memory");
            } else if (code == 'W') {
                get(bytes + addr, len);
                put_value<uint8_t>(0);
            } else {
                put_value<uint8_t>(0);
                put(bytes + addr, len);
            }
        } else {
            die("unknown request " + std::to_string(code));
        }
        std::fflush(stdout);
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 2 && std::string(argv[1]) == "--serve") return serve();
    const char *image = nullptr, *commands = nullptr, *result = nullptr;
    uint64_t max_cycles = 100000000;
    std::vector<Dump> dumps;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (i + 1 >= argc) die("missing value after " + a);
        const char* v = argv[++i];
        if (a == "--image") image = v;
        else if (a == "--commands") commands = v;
        else if (a == "--result") result = v;
        else if (a == "--max-cycles") max_cycles = std::strtoull(v, nullptr, 0);
        else if (a == "--dump") {
            Dump d;
            if (!parse_dump(v, &d)) die("bad --dump " + std::string(v));
            dumps.push_back(d);
        } else die("unknown option " + a);
    }
    if (!image || !commands || !result) die("--image, --commands and --result are required");

    FILE* f = std::fopen(image, "rb");
    if (!f) die(std::string("cannot open ") + image);
    const size_t got = std::fread(g_mem.data(), 1, g_mem.size() * 4, f);
    (void)got;
    std::fclose(f);
    const std::vector<uint32_t> stream = read_words(commands);

    Sim sim;
    start_tile(sim);
    const auto wall = std::chrono::steady_clock::now();
    uint64_t cycles = 0;
    uint32_t pushed = 0;
    const uint64_t clocked_before = sim.vector_clocked;
    const bool irq = run_stream(sim, stream, max_cycles, &cycles, &pushed);
    const uint64_t vector_clocked = sim.vector_clocked - clocked_before;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
    const uint32_t status = sim.read(STATUS), error_seq = sim.read(ERROR_SEQ);

    FILE* out = std::fopen(result, "w");
    if (!out) die(std::string("cannot write ") + result);
    std::fprintf(out, "{\"interrupt\": %s, \"cycles\": %llu, \"seconds\": %.6f, \"status\": %u, \"error_seq\": %u",
                 irq ? "true" : "false", (unsigned long long)cycles, seconds, status, error_seq);
    std::fprintf(out, ", \"vector_clocked\": %llu", (unsigned long long)vector_clocked);
    for (const auto& c : kCounters) std::fprintf(out, ", \"%s\": %u", c.name, sim.read(c.offset));
    std::fprintf(out, "}\n");
    std::fclose(out);
    for (const auto& d : dumps) {
        if (d.addr + (uint64_t)d.len > g_mem.size() * 4) die("dump range outside the memory");
        FILE* df = std::fopen(d.path.c_str(), "wb");
        if (!df) die("cannot write " + d.path);
        std::fwrite(reinterpret_cast<const char*>(g_mem.data()) + d.addr, 1, d.len, df);
        std::fclose(df);
    }
    return 0;
}
