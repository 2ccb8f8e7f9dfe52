// The simulated main memory's words (soc/sim_ram.v reaches them through DPI) and the --dump
// ranges, shared by the SoC harness (soc_main.cpp) and the tile simulator's (tilesim/tile_main.cpp).
// Included once, after the model's __Dpi.h (for C linkage), with PYARD_SIM_RAM_WORDS defined.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

std::vector<uint32_t> g_mem(PYARD_SIM_RAM_WORDS);

unsigned int pyard_mem_read(unsigned int word) { return word < g_mem.size() ? g_mem[word] : 0; }

void pyard_mem_write(unsigned int word, unsigned int data, unsigned int strb) {
    if (word >= g_mem.size()) return;
    uint32_t mask = 0;
    for (int b = 0; b < 4; b++)
        if (strb >> b & 1) mask |= 0xFFu << 8 * b;
    g_mem[word] = (g_mem[word] & ~mask) | (data & mask);
}

// A memory range to write to a file when the run ends: --dump ADDR:LEN:FILE.
struct Dump {
    uint32_t addr, len;
    std::string path;
};

// Parses ADDR:LEN:FILE (numbers in C syntax); false if it is malformed.
inline bool parse_dump(const char* text, Dump* d) {
    char path[4096];
    unsigned addr = 0, len = 0;
    if (std::sscanf(text, "%i:%i:%4095s", (int*)&addr, (int*)&len, path) != 3) return false;
    *d = Dump{addr, len, path};
    return true;
}
