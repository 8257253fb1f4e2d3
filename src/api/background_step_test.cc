// BackgroundStep with steps that stand for a call: each tells where its reply lies (as a transport
// does, WhileWaiting::RunHere) and moves its progress word as the test says; the caller's waits
// return as the word passes a range, or once the step ends.
#include "tessera/background_step.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/while_waiting.h"

namespace tessera::api {
namespace {

using std::chrono::seconds;

// A step that sends a call with its reply room in `room` (progress word `word`, or none) and
// then waits until `finish` is set.
struct FakeCall {
  std::vector<char> room = std::vector<char>(1000);
  std::atomic<uint64_t> word{0};
  bool in_place = true;
  std::promise<void> finish;
  std::shared_future<void> finished = finish.get_future().share();

  std::function<Handle()> Step() {
    return [this] {
      WaitingCall c;
      if (in_place) {
        c.progress = &word;
        c.reply_base = room.data();
        c.reply_room = room.size();
      }
      c.deadline = Now() + seconds(60);
      WhileWaiting::RunHere(c);
      EXPECT_EQ(finished.wait_for(seconds(60)), std::future_status::ready);
      return Handle();
    };
  }
};

TEST(BackgroundStepTest, ARangeIsReadyOnceItsReplyIsWrittenThatFarWhileTheStepGoesOn) {
  BackgroundStep s;
  for (int step = 0; step < 3; ++step) {
    FakeCall call;
    s.Start(call.Step());
    EXPECT_TRUE(s.in_flight());
    auto ready =
        std::async(std::launch::async, [&] { return s.ValuesReady(&call.room[100], &call.room[200]); });
    call.word.store(150, std::memory_order_release);  // short of the range's end: still waiting
    EXPECT_EQ(ready.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
    call.word.store(200, std::memory_order_release);
    ASSERT_EQ(ready.wait_for(seconds(30)), std::future_status::ready);
    EXPECT_TRUE(ready.get());
    EXPECT_TRUE(s.in_flight()) << "the step goes on";
    EXPECT_TRUE(s.ValuesReady(&call.room[0], &call.room[200])) << "already written";
    call.finish.set_value();
    EXPECT_TRUE(s.Wait().Wait().ok());
    EXPECT_FALSE(s.in_flight());
    EXPECT_FALSE(s.ValuesReady(&call.room[0], &call.room[10])) << "no step on its way";
  }
  EXPECT_EQ(s.steps_ahead(), 3u) << "one per step, however many ranges";
}

// Not in place, a range outside the reply, or a reply that ends short of it: nothing can tell
// before the step ends, so the wait is for the step.
TEST(BackgroundStepTest, WhatCannotBeToldWaitsForTheStepsEnd) {
  BackgroundStep s;
  for (int kind = 0; kind < 3; ++kind) {
    FakeCall call;
    call.in_place = kind != 0;
    s.Start(call.Step());
    std::vector<char> elsewhere(10);
    auto ready = std::async(std::launch::async, [&] {
      if (kind == 1) return s.ValuesReady(&call.room[990], &call.room[0] + 1001);  // past the room
      if (kind == 2) return s.ValuesReady(&call.room[500], &call.room[600]);
      return s.ValuesReady(&call.room[0], &call.room[10]);
    });
    call.word.store(kind == 2 ? 550 : 0, std::memory_order_release);
    EXPECT_EQ(ready.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout) << kind;
    call.finish.set_value();
    ASSERT_EQ(ready.wait_for(seconds(30)), std::future_status::ready) << kind;
    EXPECT_FALSE(ready.get()) << kind;
    EXPECT_TRUE(s.Wait().Wait().ok());
  }
  EXPECT_EQ(s.steps_ahead(), 0u);
  // No step yet at all: at once.
  BackgroundStep fresh;
  char c[2];
  EXPECT_FALSE(fresh.ValuesReady(&c[0], &c[1]));
  EXPECT_TRUE(fresh.Wait().Wait().ok()) << "no step: a handle with nothing to wait for";
}

// Values that come over several calls (a ValuesArrival, as client/arriving_values.h): there up to
// `landed` bytes of `room`; once `stuck` is set, nothing further will be told.
struct FakeArrival : ValuesArrival {
  std::vector<char> room = std::vector<char>(size_t{1} << 20);
  std::atomic<size_t> landed{0};
  std::atomic<bool> stuck{false};
  mutable std::atomic<bool> asked_off_the_step{false};  // asked from a thread not the step's
  std::thread::id step_thread;

  bool WrittenUpTo(const void* p, const WaitingCall&) const override {
    if (std::this_thread::get_id() != step_thread) asked_off_the_step = true;
    const auto need = static_cast<size_t>(static_cast<const char*>(p) - room.data());
    const TimePoint until = Now() + seconds(60);
    while (landed.load() < need) {
      if (stuck.load() || Now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
  std::pair<const char*, const char*> Span() const override {
    return {room.data(), room.data() + room.size()};
  }
  std::function<Handle()> Step(std::shared_future<void> finished) {
    return [this, finished] {
      step_thread = std::this_thread::get_id();
      WaitingCall c;
      c.arrival = this;
      c.deadline = Now() + seconds(60);
      WhileWaiting::RunHere(c);
      EXPECT_EQ(finished.wait_for(seconds(60)), std::future_status::ready);
      return Handle();
    };
  }
};

// Over several calls the step's thread follows the values as they land (the tracker is its own),
// in runs of 64 KiB: a range is ready once a run past its end has landed, the step going on.
TEST(BackgroundStepTest, OverSeveralCallsARangeIsReadyOnceTheStepsThreadSawItLand) {
  BackgroundStep s;
  FakeArrival values;
  std::promise<void> finish;
  s.Start(values.Step(finish.get_future().share()));
  auto ready =
      std::async(std::launch::async, [&] { return s.ValuesReady(&values.room[100], &values.room[200000]); });
  values.landed = 150000;  // short of the range's end: still waiting
  EXPECT_EQ(ready.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  values.landed = 4 << 16;  // the fourth run's end, past 200,000
  ASSERT_EQ(ready.wait_for(seconds(30)), std::future_status::ready);
  EXPECT_TRUE(ready.get());
  EXPECT_TRUE(s.in_flight()) << "the step goes on";
  // A range past what has landed, then nothing more told (a call answered by a copy): the wait
  // is for the step's end.
  auto later =
      std::async(std::launch::async, [&] { return s.ValuesReady(&values.room[0], &values.room[500000]); });
  values.stuck = true;
  EXPECT_EQ(later.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  finish.set_value();
  ASSERT_EQ(later.wait_for(seconds(30)), std::future_status::ready);
  EXPECT_FALSE(later.get());
  EXPECT_TRUE(s.Wait().Wait().ok());
  EXPECT_FALSE(values.asked_off_the_step) << "only the step's thread asks the tracker";
  EXPECT_EQ(s.steps_ahead(), 1u);

  // Outside the step's values: nothing can tell, the wait is for the step.
  FakeArrival other;
  std::promise<void> finish2;
  s.Start(other.Step(finish2.get_future().share()));
  std::vector<char> elsewhere(10);
  auto outside = std::async(std::launch::async, [&] { return s.ValuesReady(&elsewhere[0], &elsewhere[10]); });
  other.landed = other.room.size();
  EXPECT_EQ(outside.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  finish2.set_value();
  ASSERT_EQ(outside.wait_for(seconds(30)), std::future_status::ready);
  EXPECT_FALSE(outside.get());
  EXPECT_TRUE(s.Wait().Wait().ok());
  EXPECT_EQ(s.steps_ahead(), 1u);
}

// A step left on its way when the object goes: the destructor waits for it.
TEST(BackgroundStepTest, TheDestructorWaitsForTheStepOnItsWay) {
  FakeCall call;
  std::atomic<bool> ended{false};
  std::thread later;
  {
    BackgroundStep s;
    s.Start([&] {
      Handle h = call.Step()();
      ended = true;
      return h;
    });
    later = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the step's own time, not sync
      call.finish.set_value();
    });
  }
  EXPECT_TRUE(ended);
  later.join();
}

}  // namespace
}  // namespace tessera::api
