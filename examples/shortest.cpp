// The shortest complete program that trains a model of one's own with qkv's Trainer
// (docs/libraries.md, "Use qkv from your own program", shows it whole). Does a row's first
// token appear again?
#include <cstdio>
#include <qkv/autograd/ops.hpp>
#include <qkv/nn/attention.hpp>
#include <qkv/nn/layers.hpp>
#include <qkv/optim/optimizers.hpp>
#include <qkv/train/trainer.hpp>
using namespace qkv;

struct Model : nn::Module {  // one self-attention layer, read at the first position
  Generator g{1};
  std::shared_ptr<nn::Embedding> embed =
      register_module("embed", std::make_shared<nn::Embedding>(16, 32, g));
  std::shared_ptr<nn::MultiHeadAttention> attn =
      register_module("attn", std::make_shared<nn::MultiHeadAttention>(32, 4, g));
  std::shared_ptr<nn::Linear> out = register_module("out", std::make_shared<nn::Linear>(32, 2, g));
  ag::Var forward(const Tensor& ids) const {  // ids: (B, n) -> logits (B, 2)
    const ag::Var x = embed->forward(ids);
    return out->forward(ag::select(ag::add(x, attn->forward(x, x, x)), 1, 0));
  }
};

int main() {
  Model model;
  Generator data(2);
  optim::Adam adam(model.named_parameters(), {.lr = 3e-3});
  auto step = [&] {  // a fresh batch, its loss
    const Tensor ids = randint({64, 10}, 0, 16, data);
    const Tensor again = sum(eq(ids.narrow(1, 1, 9), ids.narrow(1, 0, 1)).to(DType::f32), {1});
    return train::Forward{ag::cross_entropy(model.forward(ids), gt(again, 0.0).to(DType::i64))};
  };
  train::Trainer trainer(model.parameters(), adam, step, {.total_steps = 600});
  train::Callbacks log;
  log.step_end = [](train::Trainer&, const train::StepStats& s) {
    if (s.step % 100 == 0) std::printf("step %4lld  loss %.3f\n", (long long)s.step, s.loss);
  };
  trainer.add_hook(log);
  trainer.fit();
}
