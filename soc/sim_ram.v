// Storage of the simulated main memory (soc/main_memory.py): the words live in the C++ harness
// (sim/harness/soc_main.cpp), reached through DPI, so a memory of any size costs no Verilog, no
// generation time and no model size, and the harness loads and dumps it directly.
// Simulation only. Reads are synchronous and read-before-write.
module pyard_sim_ram #(
    parameter integer WIDTH = 64,
    parameter integer ABITS = 21
) (
    input wire clk,
    input wire ren,
    input wire [ABITS-1:0] raddr,
    output reg [WIDTH-1:0] rdata,
    input wire [WIDTH/8-1:0] wstrb,
    input wire [ABITS-1:0] waddr,
    input wire [WIDTH-1:0] wdata
);
  import "DPI-C" function int unsigned pyard_mem_read(input int unsigned word);
  import "DPI-C" function void pyard_mem_write(input int unsigned word, input int unsigned data,
                                               input int unsigned strb);
  localparam integer WORDS = WIDTH / 32;
  integer i;
  always @(posedge clk) begin
    if (ren) begin
      for (i = 0; i < WORDS; i = i + 1) rdata[i*32+:32] <= pyard_mem_read(raddr * WORDS + i);
    end
    for (i = 0; i < WORDS; i = i + 1) begin
      if (|wstrb[i*4+:4]) pyard_mem_write(waddr * WORDS + i, wdata[i*32+:32], {28'd0, wstrb[i*4+:4]});
    end
  end
endmodule
