// [data] task: the registry of the data a run can train on. One line of QKV_TASKS per task makes
// its enum value, its name in configs, its traits and the declaration of its loader; the loader
// itself is the task's own file under data/tasks/ (built without a CMake edit). Adding a line
// and a file is all a new task of an existing family needs (docs/extending.md).
//
//   X(name, family, source)
//     family  pairs   (source, target) examples: nn::EncoderDecoder, decoded and scored
//             lm      one running token stream: nn::DecoderLM, scored by its loss
//             classify  (symbols, class) examples: nn::EncoderClassifier, scored by accuracy
//     source  symbols        generated from the seed, lengths in [data.min_len, data.max_len]
//             fixed_symbols  generated from the seed at lengths of its own
//             text           natural text (a file, or generated like dates), scored by BLEU
//
//   copy | reverse | sort   synthetic symbol sequences (data/tasks.hpp)
//   annotated_copy          the Annotated Transformer's copy task
//   dates                   human-written dates -> ISO dates (data/dates.hpp)
//   tsv                     a tab-separated corpus of sentence pairs (data/corpus.hpp)
//   parallel                line-aligned corpus files per split (data/parallel.hpp)
//   lm                      running text for a language model (data/lm.hpp)
//   repeat                  a stream of repeated random segments: in-context copying pays
//                           (induction heads; data/tasks/repeat.cpp)
//   dyck | parity | majority  a class of a bracket or bit string (data/classify_tasks.hpp;
//                           data/tasks/classify.cpp)
#pragma once
#include <span>

#include "core/names.hpp"

#define QKV_TASKS(X)                      \
  X(copy, pairs, symbols)                 \
  X(reverse, pairs, symbols)              \
  X(sort, pairs, symbols)                 \
  X(annotated_copy, pairs, fixed_symbols) \
  X(dates, pairs, text)                   \
  X(tsv, pairs, text)                     \
  X(parallel, pairs, text)                \
  X(lm, lm, text)                         \
  X(repeat, lm, symbols)                  \
  X(dyck, classify, symbols)              \
  X(parity, classify, symbols)            \
  X(majority, classify, symbols)          \
  /* a task's line goes above */

namespace qkv::data {

struct DataConfig;
struct DataSplits;

enum class TaskFamily { pairs, lm, classify };
enum class TaskSource { symbols, fixed_symbols, text };

#define QKV_TASK_ENUM(name, family, source) name,
enum class TaskKind { QKV_TASKS(QKV_TASK_ENUM) };
#undef QKV_TASK_ENUM

#define QKV_TASK_NAME(name, family, source) {#name, TaskKind::name},
inline constexpr EnumName<TaskKind> kTaskNames[] = {QKV_TASKS(QKV_TASK_NAME)};
#undef QKV_TASK_NAME
constexpr std::span<const EnumName<TaskKind>> names_of(TaskKind) { return kTaskNames; }

// Each task's loader, defined in its file under data/tasks/: fills out's three splits (or, a
// language model, its token streams), vocabularies and framing from the [data] keys.
#define QKV_TASK_LOADER(name, family, source) void load_task_##name(const DataConfig&, DataSplits&);
QKV_TASKS(QKV_TASK_LOADER)
#undef QKV_TASK_LOADER

// A task's line of QKV_TASKS: its family and its source.
struct TaskTraits {
  TaskFamily family;
  TaskSource source;
};
constexpr TaskTraits traits_of(TaskKind t) {
  switch (t) {
#define QKV_TASK_TRAITS(name, family, source) \
  case TaskKind::name:                        \
    return {TaskFamily::family, TaskSource::source};
    QKV_TASKS(QKV_TASK_TRAITS)
#undef QKV_TASK_TRAITS
  }
  return {TaskFamily::pairs, TaskSource::text};
}
constexpr TaskFamily family_of(TaskKind t) { return traits_of(t).family; }
constexpr TaskSource source_of(TaskKind t) { return traits_of(t).source; }

// The task's family: sequence-to-sequence pairs, or one token stream for a language model.
constexpr bool is_language_model(TaskKind t) { return family_of(t) == TaskFamily::lm; }

// Pairs of natural text, decoded to text and scored by BLEU (the others are symbols or an LM).
constexpr bool is_text_pairs(TaskKind t) {
  return family_of(t) == TaskFamily::pairs && source_of(t) == TaskSource::text;
}

// Generated on the fly from the seed (no file), as symbols.
constexpr bool is_synthetic(TaskKind t) { return source_of(t) != TaskSource::text; }

// Synthetic with lengths set by data.min_len / max_len (eval --max-len regenerates it longer).
constexpr bool has_length_range(TaskKind t) { return source_of(t) == TaskSource::symbols; }

}  // namespace qkv::data
