// [data] task: which data a run trains on, with its names table (core/names.hpp) and the traits
// the rest of qkv asks instead of comparing names.
//
//   copy | reverse | sort   synthetic symbol sequences (data/tasks.hpp)
//   annotated_copy          the Annotated Transformer's copy task
//   dates                   human-written dates -> ISO dates (data/dates.hpp)
//   tsv                     a tab-separated corpus of sentence pairs (data/corpus.hpp)
//   parallel                line-aligned corpus files per split (data/parallel.hpp)
//   lm                      running text for a language model (data/lm.hpp)
#pragma once
#include <span>

#include "core/names.hpp"

namespace qkv::data {

enum class TaskKind { copy, reverse, sort, annotated_copy, dates, tsv, parallel, lm };
inline constexpr EnumName<TaskKind> kTaskNames[] = {
    {"copy", TaskKind::copy},         {"reverse", TaskKind::reverse},
    {"sort", TaskKind::sort},         {"annotated_copy", TaskKind::annotated_copy},
    {"dates", TaskKind::dates},       {"tsv", TaskKind::tsv},
    {"parallel", TaskKind::parallel}, {"lm", TaskKind::lm}};
constexpr std::span<const EnumName<TaskKind>> names_of(TaskKind) { return kTaskNames; }

// The task's family: sequence-to-sequence pairs, or one token stream for a language model.
constexpr bool is_language_model(TaskKind t) {
  switch (t) {
    case TaskKind::lm:
      return true;
    case TaskKind::copy:
    case TaskKind::reverse:
    case TaskKind::sort:
    case TaskKind::annotated_copy:
    case TaskKind::dates:
    case TaskKind::tsv:
    case TaskKind::parallel:
      break;
  }
  return false;
}

// Pairs of natural text, decoded to text and scored by BLEU (the others are symbols or an LM).
constexpr bool is_text_pairs(TaskKind t) {
  switch (t) {
    case TaskKind::dates:
    case TaskKind::tsv:
    case TaskKind::parallel:
      return true;
    case TaskKind::copy:
    case TaskKind::reverse:
    case TaskKind::sort:
    case TaskKind::annotated_copy:
    case TaskKind::lm:
      break;
  }
  return false;
}

// Generated on the fly from the seed (no file).
constexpr bool is_synthetic(TaskKind t) {
  switch (t) {
    case TaskKind::copy:
    case TaskKind::reverse:
    case TaskKind::sort:
    case TaskKind::annotated_copy:
      return true;
    case TaskKind::dates:
    case TaskKind::tsv:
    case TaskKind::parallel:
    case TaskKind::lm:
      break;
  }
  return false;
}

}  // namespace qkv::data
