"""FPGA synthesis of pyard's designs: resources per block (Yosys) and clock rate (nextpnr-ecp5)."""
