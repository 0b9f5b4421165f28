// Recurrent layers: GRU and LSTM as torch.nn.GRU / torch.nn.LSTM with batch_first = True, one
// or more layers, one direction or two. The equations, the gate order (GRU r, z, n; LSTM i, f,
// g, o) and the parameters are torch's, under torch's names, so a torch state_dict loads as is:
//   weight_ih_l{L} (G H, in), weight_hh_l{L} (G H, H), bias_ih_l{L}, bias_hh_l{L} (G H), and the
//   same with the suffix _reverse for the second direction; in = input_size for layer 0, else
//   directions * H; G = 3 (GRU) or 4 (LSTM). Initialised as torch: U(-1/sqrt(H), 1/sqrt(H)).
// Each layer of each direction is one op on the tape (ag::gru, ag::lstm: the backward through
// time written out in core/recurrent.cpp). No dropout between layers (torch's default of 0).
//
// Padding: valid (B, n) bool, true on real positions (nn::valid_mask(lengths, n) for lengths).
// A padded position is skipped: the state passes through it unchanged and its output is 0, so
// padding changes no real position's output, gradient or final state (torch's packed sequences
// when the real positions are a prefix; the reverse direction starts at each row's last one).
//
// Hook points (nn/hooks.hpp), not yet in docs/hooks.md's table because no model is built from
// these layers yet; named from hook_prefix (default "rnn."), L the layer from 0:
//   rnn.L.out  (B, n, D H)  the layer's output sequence (both directions side by side), the
//                           next layer's input; 0 at padded positions
//   rnn.L.h    (D, B, H)    the layer's final hidden state per direction (forward first)
//   rnn.L.c    (D, B, H)    LSTM only: the final cell state per direction
// An encoder built from them would name them "encoder.rnn.L.out" and so on.
#pragma once
#include <string>
#include <vector>

#include "core/random.hpp"
#include "core/recurrent.hpp"
#include "nn/module.hpp"

namespace qkv::nn {

class Recurrent : public Module {
 public:
  Recurrent(RecurrentCell cell, int64_t input_size, int64_t hidden_size, Generator& gen,
            int64_t layers = 1, bool bidirectional = false);

  struct Output {
    Var out;   // (B, n, D H): the last layer's outputs, D = 2 when bidirectional, else 1
    Var h, c;  // (layers D, B, H): final states, index L D + direction (torch's h_n, c_n)
  };
  // x: (B, n, input_size); valid: (B, n) bool or undefined (all real); h0, c0: (layers D, B, H)
  // or undefined (zeros; c0 for the LSTM only).
  Output forward(const Var& x, const Tensor& valid = Tensor(), const Var& h0 = Var(),
                 const Var& c0 = Var()) const;

  // Appends the hook points' names, in the order forward passes them.
  void list_hooks(std::vector<std::string>& out) const;

  struct Weights {
    Var w_ih, w_hh, b_ih, b_hh;
  };
  std::vector<Weights> weights;  // index L D + direction
  RecurrentCell cell;
  int64_t input_size, hidden_size, layers, directions;
  std::string hook_prefix = "rnn.";
};

// torch.nn.GRU(input_size, hidden_size, layers, batch_first = True, bidirectional)
class GRU : public Recurrent {
 public:
  GRU(int64_t input_size, int64_t hidden_size, Generator& gen, int64_t layers = 1,
      bool bidirectional = false)
      : Recurrent(RecurrentCell::gru, input_size, hidden_size, gen, layers, bidirectional) {}
};

// torch.nn.LSTM(input_size, hidden_size, layers, batch_first = True, bidirectional)
class LSTM : public Recurrent {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, Generator& gen, int64_t layers = 1,
       bool bidirectional = false)
      : Recurrent(RecurrentCell::lstm, input_size, hidden_size, gen, layers, bidirectional) {}
};

}  // namespace qkv::nn
