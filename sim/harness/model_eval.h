// Evaluating a Verilated model without the runtime's bookkeeping around each evaluation.
//
// Vtop::eval() runs the model's own evaluation function between two pieces of runtime work that a
// single-threaded model with no classes or dynamic objects (all the Verilog pyard generates) never
// needs: a mutex-guarded sweep of objects to delete and a flush of the worker threads' message
// queues. At two evals a cycle their locks are about 4 % of a tile simulation (perf). FastEval
// calls the evaluation function Verilator generates, `<prefix>___024root___eval`, directly once
// the model has been initialised by one ordinary eval(), and falls back on eval() for a model built
// with threads, when given no function (a traced model, whose eval() also marks the cycle's
// activity for the trace) or when the function is not there: it is declared weak, so a Verilator
// that names it otherwise still links, and runs as before.
#pragma once

#define PYARD_DECLARE_ROOT_EVAL(PREFIX) \
    class PREFIX##___024root;           \
    void PREFIX##___024root___eval(PREFIX##___024root*) __attribute__((weak));

template <typename Top, typename Root>
class FastEval {
  public:
    FastEval(Top* top, void (*root_eval)(Root*)) : top_(top) {
        top->eval();  // initialises the model; with the inputs unchanged the next eval changes nothing
        root_eval_ = top->threads() == 1 ? root_eval : nullptr;
    }
    inline void operator()() const {
        if (root_eval_) {
            root_eval_(top_->rootp);
        } else {
            top_->eval();
        }
    }

  private:
    Top* top_;
    void (*root_eval_)(Root*);
};
