// Clang's thread-safety attributes (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html), so
// the compiler checks which mutex guards which member. Under GCC they expand to nothing; the
// ThreadSafetyTest builds the annotated files with clang -Wthread-safety -Werror.
#pragma once

#if defined(__clang__)
#define TESSERA_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TESSERA_THREAD_ANNOTATION(x)
#endif

// Abseil (pulled in by gRPC's headers) defines some of the same names with the same meaning;
// ours replace them, so the order of includes does not matter and GCC does not warn.
#undef CAPABILITY
#undef SCOPED_CAPABILITY
#undef GUARDED_BY
#undef PT_GUARDED_BY
#undef REQUIRES
#undef ACQUIRE
#undef RELEASE
#undef EXCLUDES
#undef NO_THREAD_SAFETY_ANALYSIS

#define CAPABILITY(x) TESSERA_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY TESSERA_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) TESSERA_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) TESSERA_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) TESSERA_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) TESSERA_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) TESSERA_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define EXCLUDES(...) TESSERA_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS TESSERA_THREAD_ANNOTATION(no_thread_safety_analysis)
