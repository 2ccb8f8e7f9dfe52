// The harness' side of the registered four-phase debug port (soc/debug_port.py) of a simulation
// top whose port is named `dbg` (Verilator spells dbg__x as dbg___05Fx): SocSim and TileSim.
#pragma once

#include <cstdint>

struct DebugAnswer {
    bool answered;  // done rose and fell within the budget
    bool err;       // the bus answered with an error
    uint32_t rdata;
};

// One access: raise valid with the request, wait for done, drop valid, wait for done to fall, at
// most `budget` cycles of `tick()` in all.
template <typename Top, typename Tick>
DebugAnswer debug_access(Top* top, Tick&& tick, uint32_t addr, bool write, uint32_t wdata, int budget) {
    top->dbg___05Fvalid = 1;
    top->dbg___05Faddr = addr;
    top->dbg___05Fwrite = write;
    top->dbg___05Fwdata = wdata;
    while (!top->dbg___05Fdone && budget > 0) tick(), budget--;
    DebugAnswer answer{top->dbg___05Fdone != 0, top->dbg___05Fdone && top->dbg___05Ferr, top->dbg___05Frdata};
    top->dbg___05Fvalid = 0;
    while (top->dbg___05Fdone && budget > 0) tick(), budget--;
    answer.answered = answer.answered && budget > 0;
    return answer;
}
